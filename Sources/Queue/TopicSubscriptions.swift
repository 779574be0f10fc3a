import JSON
import Postgres

/// One topic's subscriptions as herald.topic_subscriptions records them.
public struct TopicSummary: Sendable, Equatable {
    /// "" for rows carried out under whichever pool's project.
    public var project: String
    public var topic: String
    public var subscribed: Int
    public var pending: Int
    public var removing: Int
    public var failed: Int

    public var json: JSONValue {
        ["project": .string(project), "topic": .string(topic), "subscribed": JSONValue(subscribed),
         "pending": JSONValue(pending), "removing": JSONValue(removing), "failed": JSONValue(failed)]
    }
}

/// The SQL behind `herald topics` (herald.topic_stats, herald.topic_subscriptions).
public enum TopicSubscriptions {
    public static func list(_ connection: PGConnection) throws(PostgresError) -> [TopicSummary] {
        let rows = try connection.query(SQL.topicStats)
        return (0..<rows.rowCount).map { summary(rows, $0) }
    }

    /// The topic's counts (one per project it has rows under), and up to `limit` tokens FCM
    /// refused, with the error, newest first.
    public static func show(_ connection: PGConnection, topic: String, limit: Int = 20) throws(PostgresError)
        -> (summaries: [TopicSummary], failures: [(token: String, error: String)]) {
        let rows = try connection.query(SQL.topicStatsOfTopic, [.text(topic)])
        let failed = try connection.query(SQL.topicFailures, [.text(topic), .int(limit)])
        return ((0..<rows.rowCount).map { summary(rows, $0) },
                (0..<failed.rowCount).map { (failed[$0, 0] ?? "", failed[$0, 1] ?? "") })
    }

    static func summary(_ rows: PGResult, _ row: Int) -> TopicSummary {
        TopicSummary(project: rows[row, 0] ?? "", topic: rows[row, 1] ?? "", subscribed: rows.int(row, 2) ?? 0,
                     pending: rows.int(row, 3) ?? 0, removing: rows.int(row, 4) ?? 0, failed: rows.int(row, 5) ?? 0)
    }

    // The pool's carrier (Worker's TopicSubscriptionCarrier).

    /// Claims up to `limit` due rows of FCM project `fcmProject` (and of no project) for `worker`
    /// under a lease of `leaseSeconds`: project, topic, token, state, generation, attempts.
    public static func claimWork(_ connection: PGConnection, fcmProject: String, worker: String, limit: Int,
                                 leaseSeconds: Double) throws(PostgresError) -> PGResult {
        try connection.query(SQL.claimTopicRows, [.text(fcmProject), .text(worker), .int(limit), .double(leaseSeconds)])
    }

    /// The claim of a worker carrying many projects: up to `limit` due rows of the registry's FCM
    /// projects `names` (nil: every one) less `skip`, and, with `ownFCMProject` (the pool's own
    /// key), of no project and of that FCM project: registry name (NULL: the pool's own key),
    /// project, topic, token, state, generation, attempts.
    public static func claimCarriedWork(_ connection: PGConnection, ownFCMProject: String?, names: [String]?, skip: [String],
                                        worker: String, limit: Int, leaseSeconds: Double) throws(PostgresError) -> PGResult {
        try connection.query(SQL.claimCarriedTopicRows, [ownFCMProject.map { .text($0) }, names.map { .textArray($0) }, .textArray(skip),
                                                         .text(worker), .int(limit), .double(leaseSeconds)])
    }

    /// Records Instance ID's answers (or releases) for claimed rows.
    public static func recordResults(_ connection: PGConnection, _ results: [JSONValue]) throws(PostgresError) {
        try connection.query(SQL.recordTopicAnswers, [.text(JSONValue.array(results).serialized)])
    }

    /// Takes one token from the bucket named `bucket` (`rate` a second); whether it was granted.
    public static func takeRequestToken(_ connection: PGConnection, bucket: String, rate: Double) throws(PostgresError) -> Bool {
        let result = try connection.query(SQL.takeFcmProjectTokens, [.text(bucket), .double(rate), .int(1), nil])
        return (result.int(0, try result.column("granted")) ?? 0) > 0
    }
}
