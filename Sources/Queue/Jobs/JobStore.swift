import Foundation
import Postgres

/// One worker connection's part in the job life cycle: it owns the connection and hands out the
/// store's roles, each with the named statements (Sources/Queue/SQL/statements) of its one job:
/// `claimer` (Claim.swift) claims batches, promotes due jobs and extends leases; `recorder`
/// (Outcome.swift) records what became of them; `fcmProjectRates` (FCMProjectRates.swift) keeps
/// the FCM project's shared rate and its hold after a quota answer. One JobStore per connection.
public final class JobStore: @unchecked Sendable {
    /// Public for the maintenance and audience upkeep, which run their statements on it.
    public let connection: PGConnection
    /// Who holds a lease (host:pid:random), stored in herald.jobs.locked_by.
    public let workerID: String
    /// Seconds finished jobs stay in herald.jobs; 0 deletes them when they finish.
    public let retention: Double
    public let claimer: Claimer
    public let recorder: OutcomeRecorder
    public let fcmProjectRates: FCMProjectRates

    /// `fcmProject`: the FCM project this worker sends for, whose pause and shared rate its
    /// claims obey (nil: no such check, e.g. the PostgreSQL ceiling benchmark).
    public init(connection: PGConnection, workerID: String = JobStore.defaultWorkerID(), retention: Double = 86_400,
                fcmProject: String? = nil) {
        self.connection = connection
        self.workerID = workerID
        self.retention = retention
        claimer = Claimer(connection: connection, workerID: workerID, fcmProject: fcmProject)
        recorder = OutcomeRecorder(connection: connection, workerID: workerID, retention: retention)
        fcmProjectRates = FCMProjectRates(connection: connection)
    }

    /// `host:pid:random`: the random part keeps two containers that share a host name and a pid apart.
    public static func defaultWorkerID() -> String {
        "\(ProcessInfo.processInfo.hostName):\(getpid()):\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    }
}

extension PGValue {
    /// A text[] parameter value (PostgreSQL array literal, every element quoted).
    public static func textArray(_ values: [String]) -> PGValue { nullableTextArray(values) }

    /// A text[] parameter value whose nil elements are NULL.
    public static func nullableTextArray(_ values: [String?]) -> PGValue {
        let items = values.map { value -> String in
            guard let value else { return "NULL" }
            return "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        return .text("{" + items.joined(separator: ",") + "}")
    }

    /// A float8[] parameter value.
    public static func doubleArray(_ values: [Double]) -> PGValue {
        .text("{" + values.map { String($0) }.joined(separator: ",") + "}")
    }
}
