import Postgres

/// What a role may do in schema herald, by what it is for (herald.grant_role; docs/roles.md).
public enum RoleKind: String, Sendable, CaseIterable {
    /// Enqueues, creates campaigns, subscribes, reports tokens, reads outcomes.
    case producer
    /// Reads outcomes, events and statistics.
    case reader
    /// A reader that also pauses, resumes, retries, discards and sets limits, caps and quiet hours.
    case `operator`
}

/// One role given a kind, as herald.role_grants records it.
public struct RoleGrant: Sendable, Equatable {
    public var role: String
    public var kind: String
    public var grantedAt: String
    /// False when the role was dropped since (herald migrate then skips it).
    public var exists: Bool
}

/// Grants and revocations of role kinds; run as Herald's own role (the schema owner), the only
/// one that may execute herald.grant_role and herald.revoke_role.
public enum RoleGrants {
    public static func grant(_ connection: PGConnection, role: String, kind: RoleKind) throws(PostgresError) {
        try connection.query(SQL.grantRole, [.text(role), .text(kind.rawValue)])
    }

    public static func revoke(_ connection: PGConnection, role: String) throws(PostgresError) {
        try connection.query(SQL.revokeRole, [.text(role)])
    }

    public static func list(_ connection: PGConnection) throws(PostgresError) -> [RoleGrant] {
        let rows = try connection.query(SQL.roleGrantsList)
        return (0..<rows.rowCount).map { row in
            RoleGrant(role: rows[row, 0] ?? "", kind: rows[row, 1] ?? "", grantedAt: rows[row, 2] ?? "", exists: rows.bool(row, 3) ?? false)
        }
    }
}
