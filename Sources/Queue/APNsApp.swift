import JSON
import Postgres

/// An APNs app: an entry of the project registry (herald.projects, service 'apns') for Apple's
/// provider API, by the name jobs and commands use, with where its token-based .p8 key is (never
/// the key), the key's id, the team id, the topic (the app's bundle id) and whether it sends to
/// Apple's sandbox. It shares the registry, and so its namespace, pauses and job column
/// (herald.jobs.project) with the FCM projects (`Project`); only the FCM projects are listed to
/// be worked by today's pools (`ProjectRegistry.list`).
public struct APNsApp: Sendable, Equatable {
    public var name: String
    /// Where the .p8 key is: an absolute path, or `env:VAR` (the variable holds the PEM text).
    public var keyFile: String
    public var keyID: String
    public var teamID: String
    /// The bundle id: the apns-topic of an alert.
    public var topic: String
    public var sandbox: Bool
    public var maxRate: Double?
    public var pausedReason: String?
    public var pausedAt: String?
    public var createdAt: String
    public var updatedAt: String
    /// What decided the pause (herald.projects.paused_cause); `pauseCause` reads it.
    public var pausedCause: String? = nil

    public var state: String { pausedReason == nil ? "enabled" : "paused" }

    /// What decided the app's pause: `operator`, `credentials` (its .p8 key could not be used),
    /// `apns_auth` (Apple refused its provider token), `apns_topic` (TopicDisallowed), `apns_url`
    /// (the URL is not Apple's provider API); nil while it is not paused.
    public var pauseCause: String? { Project.pauseCause(recorded: pausedCause, reason: pausedReason) }

    /// The key of the app's token bucket among the FCM projects' in herald.project_rates, which
    /// every pool spends from so all of them together keep to the app's rate: `APNs:` and the
    /// name. No FCM project id is it: the registry's are lowercase (the CHECK
    /// projects_fcm_project_id_shape), as Google's are.
    public static func rateBucket(_ name: String) -> String { rateBucketPrefix + name }
    public static let rateBucketPrefix = "APNs:"
    public var rateBucket: String { Self.rateBucket(name) }

    /// The environment's base URL: Apple's production or sandbox endpoint.
    public var baseURL: String { sandbox ? Self.sandboxURL : Self.productionURL }
    public static let productionURL = "https://api.push.apple.com"
    public static let sandboxURL = "https://api.sandbox.push.apple.com"

    public var json: JSONValue {
        var object = JSONObject()
        object["name"] = .string(name)
        object["service"] = .string("apns")
        object["key_file"] = .string(keyFile)
        object["key_id"] = .string(keyID)
        object["team_id"] = .string(teamID)
        object["topic"] = .string(topic)
        object["environment"] = .string(sandbox ? "sandbox" : "production")
        object["max_rate"] = maxRate.map { .number(numberText($0)) } ?? .null
        object["state"] = .string(state)
        object["paused_reason"] = pausedReason.map { .string($0) } ?? .null
        object["pause_cause"] = pauseCause.map { .string($0) } ?? .null
        object["paused_at"] = pausedAt.map { .string($0) } ?? .null
        object["created_at"] = .string(createdAt)
        object["updated_at"] = .string(updatedAt)
        return .object(object)
    }
}

/// The SQL of the APNs apps (herald.add_apns_app, the view apns_apps; pauses and removal are the
/// registry's own functions, pause_project_sending, resume_project_sending and remove_project).
/// Each action first makes sure the name is an APNs app, so `herald apns pause` never pauses an
/// FCM project. Every change is recorded in herald.admin_log with the app's name.
public enum APNsApps {
    public static func list(_ connection: PGConnection) throws(PostgresError) -> [APNsApp] {
        apps(try connection.query(SQL.apnsAppsList))
    }

    /// The app named `name`; nil when there is none (or the name is an FCM project's).
    public static func entry(_ connection: PGConnection, name: String) throws(PostgresError) -> APNsApp? {
        apps(try connection.query(SQL.apnsAppEntry, [.text(name)])).first
    }

    /// 'fcm' or 'apns' for a registered name; nil for none.
    public static func service(_ connection: PGConnection, name: String) throws(PostgresError) -> String? {
        let rows = try connection.query(SQL.registryService, [.text(name)])
        return rows.rowCount == 0 ? nil : rows[0, 0]
    }

    static func apps(_ rows: PGResult) -> [APNsApp] {
        (0..<rows.rowCount).map { row in
            APNsApp(name: rows[row, 0] ?? "", keyFile: rows[row, 1] ?? "", keyID: rows[row, 2] ?? "", teamID: rows[row, 3] ?? "",
                    topic: rows[row, 4] ?? "", sandbox: rows.bool(row, 5) ?? false, maxRate: rows.double(row, 6),
                    pausedReason: rows[row, 7], pausedAt: rows[row, 8], createdAt: rows[row, 9] ?? "", updatedAt: rows[row, 10] ?? "",
                    pausedCause: rows[row, 11])
        }
    }

    /// Registers an app; the refusals of herald.add_apns_app (a name taken, a value of the wrong
    /// shape, a key_file that is not a reference) come back as `AdminError`.
    public static func add(_ connection: PGConnection, name: String, keyFile: String, keyID: String, teamID: String, topic: String,
                           sandbox: Bool, maxRate: Double?, source: String) throws -> APNsApp {
        try connection.transaction {
            try AdminError.translating(stateError: .badInput) {
                try connection.query(SQL.addApnsApp, [.text(name), .text(keyFile), .text(keyID), .text(teamID), .text(topic),
                                                      .bool(sandbox), maxRate.map { .double($0) }])
            }
            var details = JSONObject()
            details["apns_app"] = .string(name)
            details["key_file"] = .string(keyFile)
            details["key_id"] = .string(keyID)
            details["team_id"] = .string(teamID)
            details["topic"] = .string(topic)
            details["sandbox"] = .bool(sandbox)
            details["max_rate"] = maxRate.map { .number(numberText($0)) } ?? .null
            try AdminLog.record(connection, action: "add_apns_app", ids: [], details: .object(details), source: source)
            guard let added = try entry(connection, name: name) else {
                throw AdminError(.notFound, "APNs app \"\(name)\" was not found right after it was added")
            }
            return added
        }
    }

    /// Returns false when the app was paused already (a reason given replaces the old one).
    public static func pause(_ connection: PGConnection, name: String, reason: String?, source: String) throws -> Bool {
        try connection.transaction {
            try requireApp(connection, name: name)
            let changed = try AdminError.translating {
                try connection.query(SQL.pauseProjectSending, [.text(name), reason.map { .text($0) }]).bool(0, 0) ?? false
            }
            var details = JSONObject()
            details["apns_app"] = .string(name)
            details["reason"] = reason.map { .string($0) } ?? .null
            if changed { try AdminLog.record(connection, action: "pause_apns_app", ids: [], details: .object(details), source: source) }
            return changed
        }
    }

    /// Returns false when the app was not paused.
    public static func resume(_ connection: PGConnection, name: String, source: String) throws -> Bool {
        try connection.transaction {
            try requireApp(connection, name: name)
            let changed = try AdminError.translating {
                try connection.query(SQL.resumeProjectSending, [.text(name)]).bool(0, 0) ?? false
            }
            if changed {
                try AdminLog.record(connection, action: "resume_apns_app", ids: [], details: ["apns_app": .string(name)], source: source)
            }
            return changed
        }
    }

    /// Takes the app out of the registry; its key is left where it is. Refused while it has
    /// pending jobs, unless `force`: they are dead-lettered first. Returns how many were.
    public static func remove(_ connection: PGConnection, name: String, force: Bool = false, source: String) throws -> Int {
        try connection.transaction {
            try requireApp(connection, name: name)
            let lettered = try AdminError.translating {
                try connection.query(SQL.removeProject, [.text(name), .bool(force)]).int(0, 0) ?? 0
            }
            var details = JSONObject()
            details["apns_app"] = .string(name)
            if force {
                details["force"] = .bool(true)
                details["dead_lettered"] = JSONValue(lettered)
            }
            try AdminLog.record(connection, action: "remove_apns_app", ids: [], details: .object(details), source: source)
            return lettered
        }
    }

    /// What `update` changes: each value given replaces the app's, nil keeps it; `maxRate`
    /// `.some(nil)` puts the app back on the pool's --max-rate.
    public struct Change: Sendable {
        public var keyFile: String?
        public var keyID: String?
        public var teamID: String?
        public var topic: String?
        public var sandbox: Bool?
        public var maxRate: Double??
        public init(keyFile: String? = nil, keyID: String? = nil, teamID: String? = nil, topic: String? = nil,
                    sandbox: Bool? = nil, maxRate: Double?? = nil) {
            self.keyFile = keyFile; self.keyID = keyID; self.teamID = teamID; self.topic = topic
            self.sandbox = sandbox; self.maxRate = maxRate
        }
        public var isEmpty: Bool { keyFile == nil && keyID == nil && teamID == nil && topic == nil && sandbox == nil && maxRate == nil }
    }

    /// Corrects an app's entry (herald.update_apns_app); every running pool takes it up at its
    /// next claim of the app. The change is recorded in herald.admin_log with each value before
    /// and after. Returns the entry after the change and whether anything changed.
    public static func update(_ connection: PGConnection, name: String, _ change: Change, source: String) throws -> (APNsApp, changed: Bool) {
        try connection.transaction {
            try requireApp(connection, name: name)
            let before = try entry(connection, name: name)
            let changed = try AdminError.translating(stateError: .badInput) {
                try connection.query(SQL.updateApnsApp, [.text(name), change.keyFile.map { .text($0) }, change.keyID.map { .text($0) },
                                                         change.teamID.map { .text($0) }, change.topic.map { .text($0) },
                                                         change.sandbox.map { .bool($0) }, (change.maxRate ?? nil).map { .double($0) },
                                                         .bool(change.maxRate == .some(nil))]).bool(0, 0) ?? false
            }
            guard let after = try entry(connection, name: name) else {
                throw AdminError(.notFound, "APNs app \"\(name)\" was not found right after it was changed")
            }
            if changed, let before {
                var details = JSONObject()
                details["apns_app"] = .string(name)
                func note(_ field: String, _ old: JSONValue, _ new: JSONValue) {
                    if old != new { details[field] = ["from": old, "to": new] }
                }
                note("key_file", .string(before.keyFile), .string(after.keyFile))
                note("key_id", .string(before.keyID), .string(after.keyID))
                note("team_id", .string(before.teamID), .string(after.teamID))
                note("topic", .string(before.topic), .string(after.topic))
                note("sandbox", .bool(before.sandbox), .bool(after.sandbox))
                note("max_rate", before.maxRate.map { .number(numberText($0)) } ?? .null, after.maxRate.map { .number(numberText($0)) } ?? .null)
                try AdminLog.record(connection, action: "update_apns_app", ids: [], details: .object(details), source: source)
            }
            return (after, changed)
        }
    }

    /// Apple refused the app in a way every job of it would meet (a pool's report): the app is
    /// paused with `reason` and `cause` (`apns_auth`, `apns_topic`, `apns_url`) unless it is
    /// paused already, and the pause is recorded in herald.admin_log. Returns whether this paused it.
    public static func refused(_ connection: PGConnection, name: String, reason: String, cause: String, source: String) throws -> Bool {
        try connection.transaction {
            let paused = try connection.query(SQL.apnsAppRefused, [.text(name), .text(String(reason.prefix(500))), .text(cause)]).rowCount > 0
            if paused {
                try AdminLog.record(connection, action: "pause_apns_app", ids: [],
                                    details: ["apns_app": .string(name), "reason": .string(reason), "cause": .string(cause)], source: source)
            }
            return paused
        }
    }

    /// An error naming `name` unless it is a registered APNs app; an FCM project's name is
    /// refused saying which command serves it.
    public static func requireApp(_ connection: PGConnection, name: String) throws {
        switch try service(connection, name: name) {
        case "apns": return
        case nil: throw AdminError(.notFound, "no APNs app named \"\(name.prefix(100))\" in the registry")
        default: throw AdminError(.badInput, "\"\(name.prefix(100))\" is an FCM project, not an APNs app; herald projects serves it")
        }
    }
}
