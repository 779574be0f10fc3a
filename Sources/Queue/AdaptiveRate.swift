/// The rate a project's workers send at, found rather than configured: `herald work --max-rate`
/// is the ceiling; a project quota answer lowers the rate, and while FCM accepts it rises again
/// (additive increase, multiplicative decrease, as TCP finds a link's rate).
///
/// The state is three numbers every worker of the project shares through herald.project_rates:
/// the rate set at the last lowering (`adapted`), when (`at`), and the rate to regain quickly
/// (`regain`, see below). The rate in force at any moment follows from them, so raising it
/// needs no writes:
///
///     below regain:  adapted doubled every second since `at`, up to regain
///     then:          + max(1, increase * that rate) a second     (increase: 2 %, at least 1/s)
///     never above the ceiling.
///
/// Until the project's first quota answer (nothing lowered yet) a process does not open at the
/// ceiling: it starts at `startRate` (1,000 a second, or the ceiling if lower) and doubles every
/// half second from its start, reaching 10,000 in under two seconds, so a pool meeting a quota
/// far below --max-rate meets it with a small burst, not a full one.
///
/// A lowering sets `adapted` to `decrease` times the rate in force, or, when FCM accepted less
/// than that just before (`accepted`, what the pool's processes saw delivered since the project's
/// last pause ended, two seconds at most), to what it accepted, but never below a tenth of the
/// rate in force: a first quota answer far above the real quota comes down in a step or two.
///
/// What a lowering says depends on what FCM accepted meanwhile:
/// - it accepted at least half of the rate in force: the rate met a limit; the rate climbs back
///   slowly from the lowered one and the next answer finds the limit again;
/// - it accepted less, or nothing could be told (a storm of quota answers, every send refused
///   right after a pause): the answers do not measure a limit. The rate is still lowered, but
///   `regain` is set to the rate FCM has shown it carries: the rate in force, at most the most
///   the pool saw accepted over the last minute (`proven`), or the regain of a lowering less than
///   `memory` seconds before if that is higher. Once FCM accepts again the rate doubles back to
///   it every second instead of climbing from a fraction of itself at 1/s a second: before this,
///   a ten-second storm left a pool sending tens of messages a second for minutes.
///
/// A limit the quota answer states caps the rate at its `pace` share. When the answers keep
/// coming while every pool already paces there, the project's quota window is spent (FCM counts
/// it per minute and refuses everything until the quota is refilled in the following one): the
/// sender that sees it holds the window (`State.windowHeldUntil`) and every pool sends at
/// `probeRate` until a probe is accepted or the hold ends, then at the paced rate again.
public struct AdaptiveRate: Sendable, Equatable {
    /// The shared state (herald.project_rates); nil members: never lowered.
    public struct State: Sendable, Equatable {
        public var adapted: Double?
        public var at: Double?
        public var regain: Double?
        /// The project's limit as FCM stated it in a quota answer (messages a second,
        /// `quota_limit_value` per `quota_unit`), and when it was stated.
        public var stated: Double?
        public var statedAt: Double?
        /// The project's quota window is spent (its quota answers kept coming while the pools
        /// paced at the stated limit): until then (seconds since 1970) every pool sends at
        /// `probeRate`, unless a probe is accepted first (nil: no hold).
        public var windowHeldUntil: Double?
        public init(adapted: Double? = nil, at: Double? = nil, regain: Double? = nil, stated: Double? = nil, statedAt: Double? = nil,
                    windowHeldUntil: Double? = nil) {
            self.adapted = adapted
            self.at = at
            self.regain = regain
            self.stated = stated
            self.statedAt = statedAt
            self.windowHeldUntil = windowHeldUntil
        }

        /// Whether the window hold is in force at `now`.
        public func windowHeld(at now: Double) -> Bool {
            guard let until = windowHeldUntil, until.isFinite else { return false }
            return until > now
        }
    }

    /// `--max-rate`: never above.
    public var ceiling: Double
    /// Never below (sends a second).
    public var floor: Double = 1
    /// The share of the rate kept on a project quota answer.
    public var decrease: Double = 0.8
    /// How much of the lowered rate is added back each second while FCM accepts.
    public var increase: Double = 0.02
    /// Answers within this many seconds of the last lowering belong to the same episode and do
    /// not lower the rate again.
    public var episode: Double = 1
    /// Where a process starts before the project's first quota answer, doubling every
    /// `doubling` seconds up to the ceiling.
    public var startRate: Double = 1000
    public var doubling: Double = 0.5
    /// After a lowering that measured no limit, the rate doubles every `regainDoubling` seconds
    /// up to `regain`.
    public var regainDoubling: Double = 1
    /// A lowering this many seconds or less after the previous one keeps that one's `regain`.
    public var memory: Double = 60
    /// The share of a stated limit paced at: FCM's minute counts 4xx answers (other than 429)
    /// too, so pacing at the limit itself would run into it.
    public var pace: Double = 0.95
    /// How long a stated limit binds: after an hour without another quota answer the rate may
    /// climb past it again (a project's quota can be raised), and the next answer restates it.
    public var statedMemory: Double = 3600
    /// A lowering this many seconds or less after the previous one never sets a rate above that
    /// one's (unless that one set a rate to regain): the rate in force kept rising while nothing
    /// was sent (a minute's pause: 2 % a second is +120 %), so 80 % of it was 1.76 times the last
    /// lowering, and each storm ended with a higher rate than the one before.
    public var noRaise: Double = 600
    /// While the project's quota window is held, every pool together sends about this many
    /// messages a second: probes, the first accepted of which ends the hold.
    public var probeRate: Double = 1

    public init(ceiling: Double) { self.ceiling = ceiling }

    /// The rate a stated limit allows at `now` (its `pace` share), nil when none binds.
    public func statedCap(_ state: State, now: Double) -> Double? {
        guard let stated = state.stated, stated.isFinite, stated > 0, let at = state.statedAt, at.isFinite,
              now - at <= statedMemory else { return nil }
        return max(floor, stated * pace)
    }

    /// The rate in force at `now`: `paced`, or `probeRate` while the quota window is held.
    public func rate(_ state: State, now: Double, started: Double? = nil) -> Double {
        let rate = paced(state, now: now, started: started)
        guard state.windowHeld(at: now) else { return rate }
        return min(rate, probeRate)
    }

    /// The rate paced at when no window is held: `uncapped`, never above a stated limit. What a
    /// lowering or a stated limit starts from: the probes of a hold are no rate FCM measured.
    public func paced(_ state: State, now: Double, started: Double? = nil) -> Double {
        let rate = uncapped(state, now: now, started: started)
        guard let cap = statedCap(state, now: now) else { return rate }
        return min(rate, cap)
    }

    /// The rate in force at `now` from the adapted state alone. `started`: when this process
    /// started (nil: it opens at the ceiling).
    func uncapped(_ state: State, now: Double, started: Double? = nil) -> Double {
        guard ceiling > 0 else { return 0 }
        guard let adapted = state.adapted, let at = state.at, adapted.isFinite, at.isFinite else {
            guard let started, now >= started, startRate < ceiling else { return ceiling }
            let doublings = min(64, (now - started) / doubling)
            return min(ceiling, startRate * pow2(doublings))
        }
        var base = max(floor, adapted)
        var elapsed = max(0, now - at)
        if let regain = state.regain, regain.isFinite, regain > base {
            let target = min(regain, ceiling)
            let doublingsToTarget = log2(target / base)
            let doublings = elapsed / regainDoubling
            if doublings < doublingsToTarget { return min(ceiling, base * pow2(doublings)) }
            elapsed -= doublingsToTarget * regainDoubling
            base = target
        }
        let grown = base + elapsed * max(1, base * increase)
        return min(ceiling, max(floor, grown))
    }

    /// 2^x without Foundation, linear between whole doublings.
    private func pow2(_ x: Double) -> Double {
        var result = 1.0
        var whole = Int(x.rounded(.down))
        while whole > 0 { result *= 2; whole -= 1 }
        let fraction = x - x.rounded(.down)
        return result * (1 + fraction)
    }

    /// The inverse of `pow2` for y >= 1.
    private func log2(_ y: Double) -> Double {
        guard y > 1, y.isFinite else { return 0 }
        var whole = 0.0
        var rest = y
        while rest >= 2 { rest /= 2; whole += 1 }
        return whole + (rest - 1)
    }

    /// The state to set after a project quota answer at `now`, or nil when the last lowering was
    /// less than `episode` ago (the same episode: already lowered). `accepted`: the sends a second
    /// FCM accepted just before (not finite: too little to tell); `proven`: the most it accepted
    /// a second over the last minute (0: nothing known).
    public func lowered(_ state: State, now: Double, accepted: Double, proven: Double = 0, started: Double? = nil) -> State? {
        guard ceiling > 0 else { return nil }
        if let at = state.at, at.isFinite, now - at < episode, now >= at { return nil }
        let current = paced(state, now: now, started: started)
        var next = current * decrease
        // Not finite: not known (too short a time to tell), so it bounds nothing.
        let seen = accepted.isFinite ? max(0, accepted) : Double.infinity
        if seen < next { next = max(seen, current * 0.1) }
        // Not above the last lowering's rate, unless that one meant to regain more (a storm).
        if let adapted = state.adapted, let at = state.at, adapted.isFinite, state.regain == nil, now - at <= noRaise {
            next = min(next, adapted)
        }
        next = min(ceiling, max(floor, next))
        var lowered = State(adapted: next, at: now, regain: nil, stated: state.stated, statedAt: state.statedAt,
                            windowHeldUntil: state.windowHeldUntil)
        // FCM went on accepting at least half of the rate: a limit, found; nothing to regain.
        guard !(seen.isFinite && seen >= current * 0.5) else { return lowered }
        var regain = min(current, proven.isFinite ? max(0, proven) : 0)
        if let earlier = state.regain, let at = state.at, earlier.isFinite, now - at <= memory { regain = max(regain, earlier) }
        regain = min(regain, ceiling)
        lowered.regain = regain > next ? regain : nil
        return lowered
    }

    /// The state to set after a quota answer that states the project's limit (`perSecond`):
    /// the rate drops at once to its `pace` share (never rises: a rate in force already below
    /// it stays), shared by every pool. Nil when the same figure already binds and the rate in
    /// force is at or under it, so a burst of such answers writes once.
    public func stated(_ state: State, perSecond: Double, now: Double, started: Double? = nil) -> State? {
        guard ceiling > 0, perSecond.isFinite, perSecond > 0 else { return nil }
        let current = paced(state, now: now, started: started)
        let cap = max(floor, perSecond * pace)
        if state.stated == perSecond, statedCap(state, now: now) != nil, current <= cap { return nil }
        return State(adapted: min(ceiling, max(floor, min(current, cap))), at: now, regain: nil, stated: perSecond, statedAt: now,
                     windowHeldUntil: state.windowHeldUntil)
    }
}
