import FCM
import JSON
import Queue

/// A sender thread's view of FCM's per-target limits, without I/O: which devices and topics are
/// backing off and until when, how many quota answers in a row each drew, and what an answer
/// that does not say which limit it is about is taken for. Time is passed in.
///
/// - A device's or a topic's limit holds back that target only: its job, and any other job for
///   the same target claimed meanwhile, waits (`RetryPolicy.quotaDelay`: growing with each
///   answer in a row, Retry-After honoured; a topic at least a minute). A delivery to the target
///   ends its streak.
/// - A quota answer that does not say (no QuotaFailure detail, an unknown subject, a bare 429):
///   when the project's other sends were accepted at the same moment (at least ten deliveries
///   for each such answer over the last two seconds), it is that target's own limit, a device's
///   or a topic's; otherwise it is taken for the project's.
struct QuotaTracker {
    struct Hold: Equatable {
        var streak: Int
        var until: Double
    }

    let policy: RetryPolicy
    private(set) var holds: [String: Hold] = [:]
    /// Deliveries and unattributed quota answers in the current and the previous second.
    private var second = 0.0
    private var delivered = (current: 0, previous: 0)
    private var unattributed = (current: 0, previous: 0)
    /// Deliveries per tenth of a second over the last two seconds, for `accepted`.
    private var tenths = [Int](repeating: 0, count: 20)
    private var lastTenth = 0
    /// When the first delivery was counted: what was accepted is measured from then at most.
    private var firstDelivery: Double?
    /// Deliveries in each of the last 61 whole seconds (slot: the second modulo 61), and which
    /// second each slot holds, for `proven`.
    private var minute = [Int](repeating: 0, count: 61)
    private var minuteSecond = [Int](repeating: -1, count: 61)

    init(policy: RetryPolicy) { self.policy = policy }

    var isEmpty: Bool { holds.isEmpty }

    /// The target key of a send: `token:T`, `topic:NAME` or `condition:C`; nil for what has none.
    static func target(token: String?, body: [UInt8]) -> String? {
        if let token { return "token:" + token }
        guard let message = (try? JSONValue.parse(body))?["message"] else { return nil }
        if let topic = message["topic"]?.stringValue { return "topic:" + topic }
        if let condition = message["condition"]?.stringValue { return "condition:" + condition }
        return nil
    }

    private mutating func roll(_ now: Double) {
        let current = now.rounded(.down)
        if current > second {
            let gap = current - second
            delivered = gap >= 2 ? (0, 0) : (0, delivered.current)
            unattributed = gap >= 2 ? (0, 0) : (0, unattributed.current)
            second = current
        }
        let tenth = Int((now * 10).rounded(.down))
        if tenth > lastTenth {
            for t in (max(lastTenth + 1, tenth - 19))...tenth { tenths[t % 20] = 0 }
            lastTenth = tenth
        }
    }

    /// `count` sends of the project were accepted at `now`.
    mutating func countDeliveries(_ count: Int, now: Double) {
        guard count > 0 else { return }
        if firstDelivery == nil { firstDelivery = now }
        roll(now)
        delivered.current += count
        tenths[lastTenth % 20] += count
        let second = Int(now.rounded(.down))
        let slot = second % 61
        if minuteSecond[slot] != second { minuteSecond[slot] = second; minute[slot] = 0 }
        minute[slot] += count
    }

    /// The most sends a second FCM accepted, over any two whole seconds in a row of the last
    /// minute; nil when that is fewer than ten sends, too little to tell.
    func proven(now: Double) -> Double? {
        let current = Int(now.rounded(.down))
        func count(_ second: Int) -> Int { minuteSecond[second % 61] == second ? minute[second % 61] : 0 }
        var best = 0
        for second in max(1, current - 60)..<current { best = max(best, count(second) + count(second - 1)) }
        return best >= 10 ? Double(best) / 2 : nil
    }

    /// A delivery to `target`: its streak ends.
    mutating func cleared(_ target: String) {
        if !holds.isEmpty { holds[target] = nil }
    }

    /// Sends a second FCM accepted since `since` (at most the last two seconds); nil when that is
    /// under a third of a second or fewer than ten sends, too little to tell.
    mutating func accepted(since: Double, now: Double) -> Double? {
        roll(now)
        let start = max(since, now - 2, firstDelivery ?? now)
        guard now - start >= 0.3 else { return nil }
        let first = Int((start * 10).rounded(.up))
        var total = 0
        if first <= lastTenth { for t in first...lastTenth { total += tenths[t % 20] } }
        guard total >= 10 else { return nil }
        return Double(total) / (now - start)
    }

    /// What a quota answer about `limit` for `target` is taken for (`unattributed` resolved).
    mutating func attribute(_ limit: QuotaLimit, target: String?, now: Double) -> QuotaLimit {
        var limit = limit
        if limit == .unattributed {
            roll(now)
            unattributed.current += 1
            let others = delivered.current + delivered.previous
            let refused = unattributed.current + unattributed.previous
            limit = others >= 10 * refused ? .device : .project
        }
        // A device's or topic's limit needs a target to hold back; the kind follows the target.
        guard limit != .project, let target else { return .project }
        return target.hasPrefix("token:") ? .device : .topic
    }

    /// A device's or topic's limit refused a send to `target`: how long it waits (it and every
    /// job for it claimed meanwhile).
    mutating func refused(_ limit: QuotaLimit, target: String, retryAfter: Double?, now: Double, random: Double) -> Double {
        var hold = holds[target] ?? Hold(streak: 0, until: 0)
        hold.streak += 1
        let delay = policy.quotaDelay(limit, streak: hold.streak, retryAfter: retryAfter, random: random)
        hold.until = max(hold.until, now + delay)
        holds[target] = hold
        return hold.until - now
    }

    /// Seconds `target` still backs off, nil when it does not.
    func held(_ target: String, now: Double) -> Double? {
        guard let hold = holds[target], hold.until > now else { return nil }
        return hold.until - now
    }

    /// Forgets targets whose hold ended more than ten minutes ago (their streak with them).
    mutating func prune(now: Double) {
        guard !holds.isEmpty else { return }
        holds = holds.filter { $0.value.until + 600 > now }
    }
}
