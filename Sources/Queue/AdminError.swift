import Postgres

/// Why an operator's request (on dead letters, campaigns or queues, from the shell, the pages or
/// the API) was refused, in words the operator can act on; `kind` decides the HTTP status.
public struct AdminError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A value is malformed: a rate of 0, an empty name, a filter with a control character (HTTP 400).
        case badInput
        /// The id or name names nothing (HTTP 404).
        case notFound
        /// The state forbids it: resuming a cancelled campaign, retrying a dead letter whose
        /// dedupe key is pending (HTTP 409).
        case conflict
    }
    public var kind: Kind
    public var description: String
    public init(_ kind: Kind, _ description: String) {
        self.kind = kind
        self.description = description
    }

    /// The refusal a herald.* steering function raised, as its own one-line message (without the
    /// `herald.pause_campaign: ` it starts with, nor PostgreSQL's CONTEXT lines); nil for any
    /// other failure, which stays a database error.
    static func refusal(_ error: PostgresError, stateError: Kind) -> AdminError? {
        let kind: Kind
        switch error.sqlState {
        case "P0002": kind = .notFound           // no_data_found: no such campaign or queue
        case "22023": kind = stateError          // invalid_parameter_value
        case "55006": kind = .conflict           // object_in_use: a registry entry with pending jobs
        default: return nil
        }
        var text = error.serverMessage ?? error.message
        if text.hasPrefix("herald."), let colon = text.range(of: ": ") {
            text = String(text[colon.upperBound...])
        }
        return AdminError(kind, text)
    }

    /// Runs `body`, turning the refusals of the SQL functions into steering errors.
    static func translating<T>(stateError: Kind = .conflict, _ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as PostgresError {
            throw refusal(error, stateError: stateError) ?? error
        }
    }
}
