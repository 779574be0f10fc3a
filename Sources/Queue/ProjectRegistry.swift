import JSON
import Postgres

/// The SQL of the project registry (herald.add_project, pause_project_sending,
/// resume_project_sending, remove_project, the view project_registry): every read of an entry,
/// the operators' and the workers', is `projects_list.sql` or `project_entry.sql`, as a `Project`. Every change is recorded
/// in herald.admin_log with the project's name. Jobs name their project (herald.jobs.project).
public enum ProjectRegistry {
    /// The FCM projects (service 'fcm'): what a pool works and `herald projects` lists. APNs apps,
    /// in the same registry, are `APNsApps.list`.
    public static func list(_ connection: PGConnection) throws(PostgresError) -> [Project] {
        projects(try connection.query(SQL.projectsList))
    }

    /// The FCM project named `name`; nil when there is none (or the name is an APNs app's).
    public static func entry(_ connection: PGConnection, name: String) throws(PostgresError) -> Project? {
        projects(try connection.query(SQL.projectEntry, [.text(name)])).first
    }

    static func projects(_ rows: PGResult) -> [Project] {
        (0..<rows.rowCount).map { row in
            Project(name: rows[row, 0] ?? "", fcmProjectID: rows[row, 1] ?? "", credentials: rows[row, 2] ?? "",
                    maxRate: rows.double(row, 3), pausedReason: rows[row, 5], pausedAt: rows[row, 6],
                    createdAt: rows[row, 7] ?? "", updatedAt: rows[row, 8] ?? "", pausedCause: rows[row, 9],
                    androidApps: DeliveryData.textArray(rows[row, 10]))
        }
    }

    /// Registers a project; the refusals of herald.add_project (a name taken, a second entry for
    /// one FCM project, a credentials value that is not a reference) come back as `AdminError`.
    public static func add(_ connection: PGConnection, name: String, fcmProjectID: String, credentials: String,
                           maxRate: Double?, source: String) throws -> Project {
        try connection.transaction {
            try AdminError.translating(stateError: .badInput) {
                try connection.query(SQL.addProject, [.text(name), .text(fcmProjectID), .text(credentials), maxRate.map { .double($0) }])
            }
            var details = JSONObject()
            details["project"] = .string(name)
            details["fcm_project_id"] = .string(fcmProjectID)
            details["credentials"] = .string(credentials)
            details["max_rate"] = maxRate.map { .number(numberText($0)) } ?? .null
            try AdminLog.record(connection, action: "add_project", ids: [], details: .object(details), source: source)
            guard let added = try entry(connection, name: name) else {
                throw AdminError(.notFound, "project \"\(name)\" was not found right after it was added")
            }
            return added
        }
    }

    /// Returns false when the project was paused already (a reason given replaces the old one).
    public static func pause(_ connection: PGConnection, name: String, reason: String?, source: String) throws -> Bool {
        try connection.transaction {
            let changed = try AdminError.translating {
                try connection.query(SQL.pauseProjectSending, [.text(name), reason.map { .text($0) }]).bool(0, 0) ?? false
            }
            var details = JSONObject()
            details["project"] = .string(name)
            details["reason"] = reason.map { .string($0) } ?? .null
            if changed { try AdminLog.record(connection, action: "pause_project_sending", ids: [], details: .object(details), source: source) }
            return changed
        }
    }

    /// Returns false when the project was not paused.
    public static func resume(_ connection: PGConnection, name: String, source: String) throws -> Bool {
        try connection.transaction {
            let changed = try AdminError.translating {
                try connection.query(SQL.resumeProjectSending, [.text(name)]).bool(0, 0) ?? false
            }
            if changed {
                try AdminLog.record(connection, action: "resume_project_sending", ids: [], details: ["project": .string(name)], source: source)
            }
            return changed
        }
    }

    /// Takes the entry out of the registry; the key it names is left where it is. With `force`
    /// its pending jobs are dead-lettered first (refused otherwise while it has any). Returns how
    /// many were.
    public static func remove(_ connection: PGConnection, name: String, force: Bool = false, source: String) throws -> Int {
        try connection.transaction {
            let lettered = try AdminError.translating {
                try connection.query(SQL.removeProject, [.text(name), .bool(force)]).int(0, 0) ?? 0
            }
            var details = JSONObject()
            details["project"] = .string(name)
            if force {
                details["force"] = .bool(true)
                details["dead_lettered"] = JSONValue(lettered)
            }
            try AdminLog.record(connection, action: "remove_project", ids: [], details: .object(details), source: source)
            return lettered
        }
    }

    /// A correction of an FCM project's entry: a value given replaces the entry's, nil keeps it;
    /// `maxRate` `.some(nil)` puts it back on the pool's --max-rate. Every running pool takes the
    /// new entry up at its next claim of the project (herald.update_project notifies them).
    /// Returns the entry after the change and whether anything changed.
    public static func update(_ connection: PGConnection, name: String, credentials: String?, fcmProjectID: String?,
                              maxRate: Double??, source: String) throws -> (Project, changed: Bool) {
        try connection.transaction {
            let before = try entry(connection, name: name)
            let changed = try AdminError.translating(stateError: .badInput) {
                try connection.query(SQL.updateProject, [.text(name), credentials.map { .text($0) }, fcmProjectID.map { .text($0) },
                                                         (maxRate ?? nil).map { .double($0) }, .bool(maxRate == .some(nil))]).bool(0, 0) ?? false
            }
            guard let after = try entry(connection, name: name) else {
                throw AdminError(.notFound, "project \"\(name)\" was not found right after it was changed")
            }
            if changed, let before {
                var details = JSONObject()
                details["project"] = .string(name)
                if before.credentials != after.credentials { details["credentials"] = ["from": .string(before.credentials), "to": .string(after.credentials)] }
                if before.fcmProjectID != after.fcmProjectID { details["fcm_project_id"] = ["from": .string(before.fcmProjectID), "to": .string(after.fcmProjectID)] }
                if before.maxRate != after.maxRate {
                    details["max_rate"] = ["from": before.maxRate.map { .number(numberText($0)) } ?? .null,
                                           "to": after.maxRate.map { .number(numberText($0)) } ?? .null]
                }
                try AdminLog.record(connection, action: "update_project", ids: [], details: .object(details), source: source)
            }
            return (after, changed)
        }
    }
}
