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

    public var state: String { pausedReason == nil ? "enabled" : "paused" }

    /// The key of the app's token bucket among the FCM projects' in herald.project_rates, which
    /// every pool spends from so all of them together keep to the app's rate: `APNs:` and the
    /// name. No FCM project id is it: the registry's are lowercase (the CHECK
    /// projects_fcm_project_id_shape), as Google's are.
    public static func rateBucket(_ name: String) -> String { rateBucketPrefix + name }
    public static let rateBucketPrefix = "APNs:"
    public var rateBucket: String { Self.rateBucket(name) }

    /// The environment's base URL: Apple's production or sandbox endpoint.
    public var baseURL: String { sandbox ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com" }

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
                    pausedReason: rows[row, 7], pausedAt: rows[row, 8], createdAt: rows[row, 9] ?? "", updatedAt: rows[row, 10] ?? "")
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

    /// Takes the app out of the registry (refused while it has pending jobs); its key is left
    /// where it is.
    public static func remove(_ connection: PGConnection, name: String, source: String) throws {
        try connection.transaction {
            try requireApp(connection, name: name)
            try AdminError.translating { try connection.query(SQL.removeProject, [.text(name)]) }
            try AdminLog.record(connection, action: "remove_apns_app", ids: [], details: ["apns_app": .string(name)], source: source)
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
