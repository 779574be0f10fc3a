/// Whether FCM is reachable at all, decided from the answers alone: a value type with time
/// passed in, so tests drive it without a socket.
///
/// One failing message is that message's trouble and is retried with its own backoff. But when
/// requests fail one after another with no answer between them (connections refused, timeouts,
/// no answer at all), FCM is down for everyone, and backing off per message would spend every job's attempts
/// on the outage and bring the jobs back spread over minutes after it. So the circuit opens:
/// the sender holds back (a pause shared with every pool through herald.project_pauses, like a
/// quota answer), puts what it holds back as `released` (no attempt used), and sends one probe
/// now and then. The first HTTP answer (any status), a probe's or a late one's, closes it.
struct FCMCircuit: Sendable, Equatable {
    struct Settings: Sendable, Equatable {
        /// Failures in a row, with no answer between them, that open the circuit.
        var failuresToOpen = 8
        /// A streak older than this (seconds) starts over: failures spread over minutes are the
        /// messages' own trouble, not an outage.
        var window = 5.0
        /// The wait before the first probe; it doubles after each failed probe, up to
        /// `maxProbeInterval`.
        var probeInterval = 0.5
        var maxProbeInterval = 4.0
        /// The hold published to the other pools reaches this far past the next probe, so that
        /// none of them claims before this one has tried FCM again.
        var holdMargin = 0.5
    }

    enum State: Sendable, Equatable {
        case closed
        /// Nothing is sent; a probe goes out at `nextProbe`. `interval` is the current wait
        /// between probes.
        case open(nextProbe: Double, interval: Double)
        /// A probe is in flight.
        case probing(interval: Double)
    }

    /// What an event changed, for the sender to act on (log, hold back, resume).
    enum Change: Sendable, Equatable {
        /// Hold back until this time (seconds since 1970), and tell the other pools.
        case opened(holdUntil: Double)
        /// A probe failed: hold back longer.
        case stillDown(holdUntil: Double)
        /// FCM answered: send again.
        case closed
    }

    let settings: Settings
    private(set) var state: State = .closed
    /// Failures in a row since the last answer, and when the first of them came.
    private(set) var streak = 0
    private var streakStarted = 0.0

    init(settings: Settings = Settings()) {
        self.settings = settings
    }

    var isOpen: Bool { state != .closed }

    /// FCM gave an HTTP answer (a delivery, any 4xx, 429 included, or a 5xx, which is the
    /// message's own trouble): it is reachable.
    mutating func answered() -> Change? {
        streak = 0
        guard isOpen else { return nil }
        state = .closed
        return .closed
    }

    /// A request got no HTTP answer (refused, reset, timed out).
    mutating func failed(now: Double) -> Change? {
        guard case .closed = state else { return nil }  // in flight before the circuit opened
        if streak == 0 || now - streakStarted > settings.window {
            streak = 0
            streakStarted = now
        }
        streak += 1
        guard streak >= settings.failuresToOpen else { return nil }
        streak = 0
        let next = now + settings.probeInterval
        state = .open(nextProbe: next, interval: settings.probeInterval)
        return .opened(holdUntil: next + settings.holdMargin)
    }

    /// Whether to send a probe now.
    func probeDue(now: Double) -> Bool {
        if case .open(let next, _) = state { return now >= next }
        return false
    }

    mutating func probeSent() {
        if case .open(_, let interval) = state { state = .probing(interval: interval) }
    }

    /// The probe got no HTTP answer: wait twice as long before the next one.
    mutating func probeFailed(now: Double) -> Change? {
        guard case .probing(let interval) = state else { return nil }
        let wait = min(interval * 2, settings.maxProbeInterval)
        state = .open(nextProbe: now + wait, interval: wait)
        return .stillDown(holdUntil: now + wait + settings.holdMargin)
    }
}
