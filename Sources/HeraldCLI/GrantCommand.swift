import CommandOptions
import Foundation
import Postgres
import Queue

enum GrantCommand {
    static let options: [Option] = [
        Option(name: "as", value: "KIND", help: "What the role is for: producer, reader or operator."),
        Option(name: "revoke", help: "Take back everything ROLE was granted in schema herald instead."),
        Option(name: "list", help: "Print the roles given a kind."),
    ] + DeadCommand.databaseOptions

    static let help = helpText(
        command: "grant", summary: "Give a PostgreSQL role what one kind of user of Herald needs, and nothing else.",
        usage: """
        ROLE --as producer|reader|operator
               herald grant ROLE --revoke
               herald grant --list
        """,
        options: options,
        footer: """
        Run it as Herald's own role (the one that runs herald migrate and owns schema herald).
          producer  enqueue (every herald.enqueue* function, INSERT into herald.jobs), create
                    campaigns, subscribe and unsubscribe, report tokens (touch_token,
                    herald.device_tokens), and read outcomes, events and statistics
          reader    read outcomes, events, statistics, campaigns and queues
          operator  a reader that also pauses and resumes queues and campaigns, retries and
                    discards dead letters, sets limits, frequency caps, quiet hours, and reads
                    the audit log (herald.admin_log)
        No kind changes the project registry or reads its key paths, writes the audit log
        directly, or updates or deletes jobs. A role holds one kind: granting another replaces it.
        herald migrate grants each kind again, so what a later release adds is covered.
        In SQL: herald.grant_role(role, kind), herald.revoke_role(role). See docs/roles.md.
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "grant", arguments: arguments, options: options, positional: true)
        if parsed.has("list") {
            guard parsed.positional.isEmpty, parsed.string("as") == nil, !parsed.has("revoke") else {
                throw UsageError("herald grant --list: takes no role, --as or --revoke")
            }
            let connection = try operationsDatabase(parsed)
            let grants = try RoleGrants.list(connection)
            if grants.isEmpty { print("no role has been given a kind yet (herald grant ROLE --as producer|reader|operator)") }
            for grant in grants {
                print("\(grant.role)\t\(grant.kind)\t\(grant.grantedAt)\(grant.exists ? "" : "\t(role no longer exists)")")
            }
            return 0
        }
        guard parsed.positional.count == 1, let role = parsed.positional.first, !role.isEmpty else {
            throw UsageError("herald grant: give one role name, e.g. herald grant app --as producer; see herald grant --help")
        }
        let revoke = parsed.has("revoke")
        let kind = try chosenKind(parsed, role: role, revoke: revoke)
        let connection = try operationsDatabase(parsed)
        do {
            if let kind {
                try RoleGrants.grant(connection, role: role, kind: kind)
                print("granted \(role) the \(kind.rawValue) privileges in schema herald")
            } else {
                try RoleGrants.revoke(connection, role: role)
                print("revoked every privilege of \(role) in schema herald")
            }
        } catch {
            throw explained(error)
        }
        return 0
    }

    /// The kind of --as; nil with --revoke.
    static func chosenKind(_ parsed: ParsedOptions, role: String, revoke: Bool) throws -> RoleKind? {
        guard let text = parsed.string("as") else {
            if revoke { return nil }
            throw UsageError("herald grant \(role): give --as producer, --as reader or --as operator (or --revoke)")
        }
        if revoke { throw UsageError("herald grant \(role): give --as KIND or --revoke, not both") }
        guard let kind = RoleKind(rawValue: text) else {
            throw UsageError("herald grant \(role): --as \"\(text)\" is not a kind; give --as producer, --as reader or --as operator")
        }
        return kind
    }

    /// A refusal the user can act on: not the schema's owner, or a schema not migrated yet.
    static func explained(_ error: PostgresError) -> Error {
        switch error.sqlState {
        case "42501":
            return UsageError("herald grant: \(error.serverMessage ?? error.message)\nRun herald grant as Herald's own role, the one that runs herald migrate and owns schema herald.")
        case "42883":
            return UsageError("herald grant: the schema has no herald.grant_role yet; run herald migrate first")
        default:
            return error
        }
    }
}
