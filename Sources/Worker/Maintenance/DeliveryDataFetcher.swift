import FCM
import Foundation
import HTTPClient
import Postgres
import Queue

/// Where and how FCM's delivery data is fetched; every default is the one written beside it.
public struct DeliveryDataSettings: Sendable {
    /// The Data API's base URL (`HERALD_FCM_DATA_URL`). Default https://fcmdata.googleapis.com.
    public var baseURL: String = FCMDataAPI.defaultBaseURL
    /// A CA bundle for TLS verification (verification itself is always on). Default nil.
    public var caFile: String? = nil
    /// The pool's environment: `env:VAR` keys and HERALD_ALLOW_INSECURE_TRANSPORT are read in it.
    public var environment: [String: String] = [:]
    /// Entries asked for per page (FCM gives at most 10,000; it may give fewer). Default 1,000, FCM's own.
    public var pageSize: Int = 1_000
    /// Only the last N days are stored (older days already stored stay as they are); nil: every
    /// day FCM gives. Default nil.
    public var days: Int? = nil
    /// Seconds between two fetches of a project by the maintenance leader. Default a day.
    public var every: Double = 86_400
    /// Seconds before a failed fetch (FCM or the network) is tried again. Default an hour.
    public var retryFailedAfter: Double = 3_600
    /// Pages read per app at most: a guard against an answer that never ends. Default 1,000.
    public var maxPages: Int = 1_000

    public init(baseURL: String = FCMDataAPI.defaultBaseURL) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
    }
}

/// Lists FCM's delivery data of registry projects (FCM's Data API, `deliveryData.list`) with each
/// project's own key, page after page, and stores it (`DeliveryData.store`), replacing the days
/// FCM gave. A project without apps, or whose key may not read the data, is skipped with one
/// report naming the project and what is missing; nothing it does throws for one project's
/// sake. Used by the maintenance leader once a day (`DeliveryDataFetch`) and by
/// `herald delivery-data fetch`.
public final class DeliveryDataFetcher: @unchecked Sendable {
    /// What became of one project.
    public struct Report: Sendable, Equatable {
        public var project: String
        public var outcome: DeliveryData.FetchOutcome
        /// Why it was skipped or failed; for a fetch, what was not right with some app, if anything.
        public var reason: String?
        public var apps = 0
        public var pages = 0
        public var rows = 0
        public var revised = 0
        public var removed = 0
        /// The latest day FCM reported, if any.
        public var latestDay: DeliveryDataDay?

        /// The one line this project is worth in a log or a terminal.
        public var line: String {
            switch outcome {
            case .fetched:
                var text = "delivery data of project \(project): \(apps) app\(apps == 1 ? "" : "s"), \(pages) page\(pages == 1 ? "" : "s"), \(rows) row\(rows == 1 ? "" : "s") stored"
                if revised > 0 { text += " (\(revised) revised by FCM)" }
                if removed > 0 { text += ", \(removed) no longer reported removed" }
                if let latestDay { text += ", the latest day \(latestDay)" }
                if let reason { text += "; but \(reason)" }
                return text
            case .skipped:
                return "delivery data of project \(project) skipped: \(reason ?? "")"
            case .failed:
                return "delivery data of project \(project) not fetched (tried again later): \(reason ?? "")"
            }
        }
    }

    public let settings: DeliveryDataSettings
    private let client: HTTPClient
    private let tokenClient: HTTPClient
    /// `now` for the days window (tests move it).
    private let now: @Sendable () -> Date

    public init(settings: DeliveryDataSettings, now: @escaping @Sendable () -> Date = Date.init) throws(HTTPClientError) {
        self.settings = settings
        self.now = now
        var configuration = HTTPClientConfiguration()
        configuration.caFile = settings.caFile
        configuration.maxConnections = 2
        configuration.connectTimeoutMilliseconds = 10_000
        configuration.requestTimeoutMilliseconds = 30_000
        client = try HTTPClient(configuration: configuration)
        tokenClient = try AccessTokenProvider.tokenClient(caFile: settings.caFile)
    }

    /// Why the Data API's URL may not carry credentials (plain http to another host), or nil.
    public var transportRefusal: String? {
        TransportSecurity.refusal(settings.baseURL, setting: "HERALD_FCM_DATA_URL", allowed: TransportSecurity.allowsInsecure(settings.environment))
    }

    /// Fetches every project given, in turn, recording each one's fetch; one report each.
    public func fetch(_ connection: PGConnection, projects: [Project]) -> [Report] {
        projects.map { fetch(connection, project: $0) }
    }

    /// Fetches one project's apps and records the fetch (herald.delivery_data_fetches). A
    /// database error while storing ends this project's fetch as failed.
    public func fetch(_ connection: PGConnection, project: Project) -> Report {
        var report = fetchAndStore(connection, project: project)
        do {
            try DeliveryData.recordFetches(connection, [DeliveryData.Fetch(project: project.name, outcome: report.outcome, reason: report.reason,
                                                                           rows: report.rows, pages: report.pages)])
        } catch {
            if report.outcome == .fetched { report.outcome = .failed }
            report.reason = [report.reason, "recording the fetch failed: \(error)"].compactMap { $0 }.joined(separator: "; ")
        }
        return report
    }

    private func fetchAndStore(_ connection: PGConnection, project: Project) -> Report {
        var report = Report(project: project.name, outcome: .fetched)
        func skip(_ why: String) -> Report {
            report.outcome = .skipped
            report.reason = why
            return report
        }
        func fail(_ why: String) -> Report {
            report.outcome = .failed
            report.reason = why
            return report
        }
        guard !project.androidApps.isEmpty else { return skip(Self.noAppsReason(project.name)) }
        if let refusal = transportRefusal { return skip(refusal) }
        let account: ServiceAccount
        do { account = try project.account(environment: settings.environment) } catch {
            return skip("its key cannot be used: \(error)")
        }
        let auth = AccessTokenProvider(account: account, caFile: settings.caFile, scope: FCMDataAPI.scope, client: tokenClient)
        let since = settings.days.map { days -> DeliveryDataDay in
            let day = now().addingTimeInterval(-Double(max(0, days)) * 86_400)
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: DeliveryData.fcmTimeZone) ?? .gmt
            let parts = calendar.dateComponents([.year, .month, .day], from: day)
            return DeliveryDataDay(year: parts.year ?? 1970, month: parts.month ?? 1, day: parts.day ?? 1)
        }
        var problems: [String] = []
        for app in project.androidApps {
            let entries: [DeliveryDataEntry]
            switch listAll(app: app, fcmProject: project.fcmProjectID, auth: auth, account: account, pages: &report.pages) {
            case .success(let all): entries = all
            case .failure(let failure):
                switch failure {
                case .skip(let why): return skip(why)
                case .fail(let why): return fail(why)
                case .appUnknown(let why):
                    problems.append(why)
                    continue
                }
            }
            report.apps += 1
            do {
                let stored = try DeliveryData.store(connection, project: project.name, appID: app, entries: entries, since: since)
                report.rows += stored.stored
                report.revised += stored.revised
                report.removed += stored.removed
            } catch {
                return fail("storing the data of app \(app) failed: \(error)")
            }
            let days = entries.map(\.date).filter { day in since.map { day >= $0 } ?? true }
            if let latest = days.max(), report.latestDay.map({ latest > $0 }) ?? true { report.latestDay = latest }
        }
        if !problems.isEmpty {
            guard report.apps > 0 else { return skip(problems.joined(separator: "; ")) }
            report.reason = problems.joined(separator: "; ")
        }
        return report
    }

    /// Why a project without apps is not asked, and how to name them.
    public static func noAppsReason(_ project: String) -> String {
        "it names no Android app to ask FCM about; herald projects set \(project) --android-app APP_ID (the App ID under Project settings, Your apps, in the Firebase console)"
    }

    enum ListFailure: Error {
        /// The project's key may not read the data: no other app will do better.
        case skip(String)
        /// FCM or the network failed: another time will do better.
        case fail(String)
        /// FCM knows no such app in the project.
        case appUnknown(String)
    }

    /// Every page of one app's delivery data.
    private func listAll(app: String, fcmProject: String, auth: AccessTokenProvider, account: ServiceAccount,
                         pages: inout Int) -> Result<[DeliveryDataEntry], ListFailure> {
        var entries: [DeliveryDataEntry] = []
        var token: String?
        var seenTokens: Set<String> = []
        var renewedToken = false
        var read = 0
        while true {
            guard read < settings.maxPages else {
                return .failure(.fail("app \(app): more than \(settings.maxPages) pages; the answer did not end"))
            }
            let header: String
            do { header = try auth.authorizationHeader() } catch {
                let why = "no access token for \(account.clientEmail) with the scope \(FCMDataAPI.scope): \(error)"
                return .failure(error.refused ? .skip(why) : .fail(why))
            }
            let url = FCMDataAPI.listURL(baseURL: settings.baseURL, fcmProject: fcmProject, appID: app, pageSize: settings.pageSize, pageToken: token)
            let response: HTTPResponse
            do {
                response = try client.perform(HTTPRequest(method: "GET", url: url, headers: ["Authorization: " + header, "Accept: application/json"]))
            } catch {
                return .failure(.fail("FCM's Data API at \(settings.baseURL) could not be reached: \(error)"))
            }
            guard response.status == 200 else {
                let bearer = String(header.dropFirst("Bearer ".count))
                let refusal = DeliveryDataRefusal(httpStatus: response.status, body: response.body, redacting: [bearer])
                if refusal.unauthenticated && !renewedToken {
                    // An access token revoked or expired early: one new token, then the same page.
                    renewedToken = true
                    auth.invalidate(ifHeader: header)
                    continue
                }
                let why = refusal.problem(account: account.clientEmail, fcmProject: fcmProject, appID: app)
                if refusal.accessDenied || refusal.unauthenticated { return .failure(.skip(why)) }
                if response.status == 404 || refusal.status == "NOT_FOUND" { return .failure(.appUnknown(why)) }
                return .failure(.fail(why))
            }
            read += 1
            pages += 1
            let page: DeliveryDataPage
            do { page = try DeliveryDataPage.parse(response.body) } catch {
                return .failure(.fail("app \(app): FCM's Data API answered 200 with what is not a page: \(error)"))
            }
            entries += page.entries
            guard let next = page.nextPageToken else { return .success(entries) }
            guard seenTokens.insert(next).inserted else {
                return .failure(.fail("app \(app): FCM's Data API gave the same page token twice; the listing would not end"))
            }
            token = next
        }
    }
}
