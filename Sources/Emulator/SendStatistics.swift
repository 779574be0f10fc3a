import JSON
import Synchronization

/// A request that came back before the Retry-After the emulator gave had passed.
public struct RetryAfterViolation: Sendable, Equatable {
    /// `token` (a per-token 429/503) or `project` (the quota bucket's 429).
    public var scope: String
    /// The token, or the project ID for project scope.
    public var subject: String
    /// The error code whose Retry-After was ignored.
    public var errorCode: String
    /// How much too early the request was.
    public var earlyByMilliseconds: Int
    /// How long after the answer with the Retry-After left the request arrived: a request that
    /// arrives a moment after was sent before its client could have read the answer.
    public var afterAnswerMilliseconds: Int = 0
}

/// Counters of the send endpoint.
final class SendStatistics: Sendable {
    struct State {
        var requests = 0
        var delivered = 0
        var validateOnly = 0
        var byStatus: [Int: Int] = [:]
        var byError: [String: Int] = [:]
        /// Requests per wall-clock second for the last `window` seconds, as (second, count).
        var seconds: [(second: Int, count: Int)] = []
        var peakPerSecond = 0
        var violations = 0
        var recentViolations: [RetryAfterViolation] = []
        /// `afterAnswerMilliseconds` of every violation (up to the last 100,000).
        var violationDelays: [Int] = []
        var deviceGroupRequests = 0
    }

    static let window = 60
    static let keptViolations = 100
    private let state = Mutex(State())

    func recordSend(status: Int, errorCode: String?, delivered: Bool, validateOnly: Bool, second: Int) {
        state.withLock { s in
            s.requests += 1
            s.byStatus[status, default: 0] += 1
            if let errorCode { s.byError[errorCode, default: 0] += 1 }
            if delivered { s.delivered += 1 }
            if validateOnly { s.validateOnly += 1 }
            if let last = s.seconds.last, last.second == second {
                s.seconds[s.seconds.count - 1].count += 1
                if last.count + 1 > s.peakPerSecond { s.peakPerSecond = last.count + 1 }
            } else {
                s.seconds.append((second, 1))
                if s.peakPerSecond < 1 { s.peakPerSecond = 1 }
                if s.seconds.count > SendStatistics.window + 1 { s.seconds.removeFirst(s.seconds.count - SendStatistics.window - 1) }
            }
        }
    }

    /// Violations that arrived more than `milliseconds` after the answer they broke left.
    func violations(laterThan milliseconds: Int) -> Int {
        state.withLock { $0.violationDelays.filter { $0 > milliseconds }.count }
    }

    func recordViolation(_ violation: RetryAfterViolation) {
        state.withLock { s in
            s.violations += 1
            s.recentViolations.append(violation)
            if s.recentViolations.count > SendStatistics.keptViolations { s.recentViolations.removeFirst() }
            if s.violationDelays.count >= 100_000 { s.violationDelays.removeFirst(50_000) }
            s.violationDelays.append(violation.afterAnswerMilliseconds)
        }
    }

    func recordDeviceGroupRequest() { state.withLock { $0.deviceGroupRequests += 1 } }

    var snapshot: State { state.withLock { $0 } }

    var violationCount: Int { state.withLock { $0.violations } }

    func reset() { state.withLock { $0 = State() } }

    /// Requests a second over the last `span` whole seconds before `now` (the current second is
    /// still filling, so it is left out).
    static func rate(_ s: State, now: Int, span: Int) -> Double {
        let from = now - span
        let total = s.seconds.reduce(0) { $1.second >= from && $1.second < now ? $0 + $1.count : $0 }
        return Double(total) / Double(span)
    }
}
