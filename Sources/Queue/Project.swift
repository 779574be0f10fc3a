import Foundation
import FCM
import JSON
import Postgres

/// A project: one entry of the registry (herald.projects), a Firebase project by the name jobs
/// and commands use, and where its service-account key is (never the key). `herald projects`
/// shows and changes it (`ProjectRegistry`); `herald work --project NAME` works it: its jobs are
/// sent with the credentials the entry points at, and only if those are for the FCM project the
/// entry names (`fcmProjectID`), so a job is never sent with another project's key.
public struct Project: Sendable, Equatable {
    public var name: String
    /// The FCM project id its credentials must be for.
    public var fcmProjectID: String
    /// Where the key is: an absolute path, or `env:VAR` (the variable holds the key's JSON).
    public var credentials: String
    /// Messages per second; nil: the pool's --max-rate.
    public var maxRate: Double?
    /// Paused by an operator (herald.pause_project_sending) or by a refused key when not nil.
    public var pausedReason: String?
    /// What decided the pause (herald.projects.paused_cause: `operator`, `credentials`; nil for a
    /// pause a pool of an earlier release set). `pauseCause` reads it.
    public var pausedCause: String?
    public var pausedAt: String?
    /// ISO 8601 UTC text ("" for an entry made here rather than read).
    public var createdAt: String
    public var updatedAt: String
    /// The Firebase app ids of its Android apps, whose delivery data FCM's Data API is asked for
    /// (`herald projects set NAME --android-app ID`); empty: none is asked.
    public var androidApps: [String]

    public init(name: String, fcmProjectID: String, credentials: String, maxRate: Double? = nil, pausedReason: String? = nil,
                pausedAt: String? = nil, createdAt: String = "", updatedAt: String = "", pausedCause: String? = nil,
                androidApps: [String] = []) {
        self.name = name
        self.fcmProjectID = fcmProjectID
        self.credentials = credentials
        self.maxRate = maxRate
        self.pausedReason = pausedReason
        self.pausedCause = pausedCause
        self.pausedAt = pausedAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.androidApps = androidApps
    }

    public var state: String { pausedReason == nil ? "enabled" : "paused" }

    /// What decided the entry's pause, nil while it is not paused: see `Project.pauseCause`.
    public var pauseCause: String? { Self.pauseCause(recorded: pausedCause, reason: pausedReason) }

    /// What decided a registry entry's pause (FCM project or APNs app): the recorded cause
    /// (`operator`, `credentials`, `apns_auth`, `apns_topic`, `apns_url`), or for a pause a pool
    /// of an earlier release recorded without one, `credentials` for a refused key's reason and
    /// `operator` for any other. Nil while the entry is not paused.
    public static func pauseCause(recorded: String?, reason: String?) -> String? {
        guard let reason else { return nil }
        if let recorded { return recorded }
        return reason.hasPrefix("credentials: ") ? "credentials" : "operator"
    }

    public var json: JSONValue {
        var object = JSONObject()
        object["name"] = .string(name)
        object["fcm_project_id"] = .string(fcmProjectID)
        object["credentials"] = .string(credentials)
        object["max_rate"] = maxRate.map { .number(numberText($0)) } ?? .null
        object["state"] = .string(state)
        object["paused_reason"] = pausedReason.map { .string($0) } ?? .null
        object["pause_cause"] = pauseCause.map { .string($0) } ?? .null
        object["paused_at"] = pausedAt.map { .string($0) } ?? .null
        object["created_at"] = .string(createdAt)
        object["updated_at"] = .string(updatedAt)
        object["android_apps"] = .array(androidApps.map { .string($0) })
        return .object(object)
    }

    public struct Problem: Error, CustomStringConvertible, Sendable {
        public var description: String
        init(_ description: String) { self.description = description }
    }

    /// The registry's FCM project `name` (ProjectRegistry.entry); an error naming it when there is
    /// none, or when the name is an APNs app's.
    public static func load(_ connection: PGConnection, name: String) throws -> Project {
        guard let project = try ProjectRegistry.entry(connection, name: name) else {
            // An APNs app shares the registry; it has no service-account key to load.
            if try APNsApps.service(connection, name: name) == "apns" {
                throw Problem("\"\(name)\" is an APNs app, not an FCM project; it has no FCM key (`herald apns show \(name)` shows the app)")
            }
            throw Problem("no project named \"\(name)\" in the registry (herald.projects); `herald projects list` shows the names, `herald projects add \(name) --credentials FILE` registers it")
        }
        return project
    }

    /// A pool's worker cannot use the key of project `name` (`why` names the file or variable,
    /// never the key): the project is paused with the reason `credentials: why`, unless an
    /// operator paused it.
    public static func credentialsRefused(_ connection: PGConnection, name: String, why: String) throws {
        // `credentials: ` marks the pause as the key's (project_credentials_restored.sql lifts only
        // those); a problem that starts by naming the credentials does not say the word twice.
        let reason = "credentials: " + (why.hasPrefix("credentials ") ? String(why.dropFirst("credentials ".count)) : why)
        try connection.query(SQL.projectCredentialsRefused, [.text(name), .text(String(reason.prefix(500)))])
    }

    /// A worker of project `name` holds an access token from its key again: lifts a pause its
    /// key's failure set. Returns whether there was one.
    @discardableResult
    public static func credentialsRestored(_ connection: PGConnection, name: String) throws -> Bool {
        try connection.query(SQL.projectCredentialsRestored, [.text(name)]).rowCount > 0
    }

    /// Reads the key the registry points at (`environment`: the pool's variables, for `env:VAR`)
    /// and checks it is for this project's FCM project. Errors name the path or variable and
    /// never quote the key.
    public func account(environment: [String: String]) throws -> ServiceAccount {
        let account: ServiceAccount
        do { account = try Self.loadKey(credentials, environment: environment) } catch {
            throw Problem("project \(name): \(error)")
        }
        if let problem = TransportSecurity.tokenURIRefusal(account, source: credentials,
                                                           allowed: TransportSecurity.allowsInsecure(environment)) {
            throw Problem("project \(name): \(problem)")
        }
        guard account.projectID == fcmProjectID else {
            throw Problem("project \(name): the credentials at \(credentials) are for FCM project \"\(account.projectID)\", but the registry says \"\(fcmProjectID)\"; nothing is sent with them (fix the file, or re-register the project)")
        }
        return account
    }

    /// Reads and checks the service-account key `reference` names: an absolute path, or `env:VAR`
    /// (the variable, in `environment`, holds the key's JSON). Errors name the file or variable
    /// and the field, and never quote what the key holds.
    public static func loadKey(_ reference: String, environment: [String: String]) throws(Problem) -> ServiceAccount {
        if reference.contains("-----") || reference.contains("{") || reference.contains("\n") {
            throw Problem("--credentials holds what looks like a key itself (\(reference.count) characters, not shown); give where the key is instead: the path of the JSON key file, or env:VAR naming a variable that holds it")
        }
        if reference.hasPrefix("env:") {
            let variable = String(reference.dropFirst(4))
            guard Self.isVariableName(variable) else {
                throw Problem("--credentials env:\(variable.prefix(60)): \"\(variable.prefix(60))\" is not an environment variable name; give e.g. env:SHOP_PROD_CREDENTIALS")
            }
            guard let value = environment[variable] else {
                throw Problem("credentials env:\(variable): the environment variable \(variable) is not set; set it to the service-account JSON key (in the pool's environment too)")
            }
            if value.isEmpty {
                throw Problem("credentials env:\(variable): the environment variable \(variable) is empty; set it to the service-account JSON key")
            }
            do { return try ServiceAccount.parse(json: Array(value.utf8), path: reference) } catch {
                let problem = error.problem.replacingOccurrences(of: "the file ", with: "the value ")
                throw Problem("credentials env:\(variable): the variable \(variable) does not hold a usable service-account key: \(problem)")
            }
        }
        guard reference.hasPrefix("/") else {
            throw Problem("credentials \"\(reference.prefix(200))\" is neither an absolute path nor env:VAR; the pool may run elsewhere, so give the absolute path, e.g. --credentials \(Self.absolute(reference))")
        }
        do { return try ServiceAccount.load(path: reference) } catch {
            throw Problem("credentials \(reference): \(error.problem)")
        }
    }

    /// `[A-Za-z_][A-Za-z0-9_]{0,127}`.
    static func isVariableName(_ text: String) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= 128 else { return false }
        func letter(_ c: UInt8) -> Bool { (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 }
        return letter(first) && text.utf8.allSatisfy { letter($0) || ($0 >= 48 && $0 <= 57) }
    }

    /// `path` made absolute against the current directory.
    static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }
}
