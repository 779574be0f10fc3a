import CommandOptions
import Postgres

/// The exit statuses every herald command uses (README, "Exit statuses"), so a script or a
/// service manager can tell them apart whatever the command.
enum ExitStatus {
    /// Done, including "nothing to do" (nothing matched, already up to date).
    static let ok: Int32 = 0
    /// The command ran and failed: something it was asked to do did not happen (a dead letter
    /// that had to stay, a worker that failed, FCM refusing a send).
    static let failed: Int32 = 1
    /// Bad input: a flag, a variable, a file or an argument that is wrong or missing, or a
    /// request refused as it stands (an unknown id, a newer database). Nothing was changed.
    static let badInput: Int32 = 2
    /// PostgreSQL cannot be reached (down, refusing, wrong host or password): try again later.
    static let databaseUnreachable: Int32 = 3
}

/// The error to throw when opening `command`'s database failed: a connection failure keeps its
/// own exit status (3); anything else (a malformed URL) is bad input (2).
func databaseProblem(_ error: Error, command: String) -> Error {
    if let failure = error as? PostgresError, failure.isConnectionFailure { return failure }
    return UsageError("herald \(command): DATABASE_URL: \(error)")
}
