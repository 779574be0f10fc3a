import FCM
import Foundation
import Synchronization

/// One project's credentials as a worker sends with them: the key's account, its access tokens,
/// its FCM URL. Made when the project is first needed, replaced when its key file is rotated,
/// dropped when the project has been idle a while (`ProjectKeyRing`). A class so the sender can
/// tell a replaced one from the one its requests in flight were sent with.
final class ProjectKeys: @unchecked Sendable {
    /// The registry name (nil: the jobs of no project, sent with the pool's own key).
    let project: String?
    let account: ServiceAccount
    let auth: AccessTokenProvider
    let endpoint: FCMEndpoint
    /// `endpoint.sendURL`, built once.
    let sendURL: String
    /// The key file (nil: an `env:` variable's key, which changes only with the pool's environment).
    let keyPath: String?
    /// The file's bytes the key was read from, to notice a rotation.
    let keyBytes: Data?

    init(project: String?, account: ServiceAccount, auth: AccessTokenProvider, fcmBaseURL: String, keyPath: String?, keyBytes: Data?) {
        self.project = project
        self.account = account
        self.auth = auth
        endpoint = FCMEndpoint(baseURL: fcmBaseURL, projectID: account.projectID)
        sendURL = endpoint.sendURL
        self.keyPath = keyPath
        self.keyBytes = keyBytes
    }

    /// How a project is named in logs: "project shop", or "the jobs of no project".
    var label: String { Self.label(project) }

    static func label(_ project: String?) -> String { project.map { "project \($0)" } ?? "the jobs of no project" }
}

/// The keys of every project a worker carries now, shared by its threads: the store thread puts
/// a project's keys here before it claims the project's first jobs (and takes them out when the
/// project is idle, removed or its key breaks); the sender reads them for each job it sends.
final class ProjectKeyRing: Sendable {
    private let keys = Mutex<[String?: ProjectKeys]>([:])
    /// The APNs apps carried, beside the FCM projects.
    let apns = APNsKeyRing()
    /// Tokens fetched by providers no longer held (a counter never goes down).
    private let retired = Atomic<Int>(0)

    func keys(for project: String?) -> ProjectKeys? { keys.withLock { $0[project] } }

    func put(_ entry: ProjectKeys) { keys.withLock { $0[entry.project] = entry } }

    func put(_ entry: ProjectKeys, replacing old: ProjectKeys?) {
        if let old { retired.add(old.auth.renewals, ordering: .relaxed) }
        put(entry)
    }

    func remove(_ project: String?) {
        if let old = keys.withLock({ $0.removeValue(forKey: project) }) { retired.add(old.auth.renewals, ordering: .relaxed) }
    }

    var count: Int { keys.withLock { $0.count } }

    /// Tokens fetched by every project's provider held now (herald_token_refreshes_total's source).
    var renewals: Int { retired.load(ordering: .relaxed) + keys.withLock { $0.values.reduce(0) { $0 + $1.auth.renewals } } }
}
