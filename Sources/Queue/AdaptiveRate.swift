/// The rate a project's workers send at, found rather than configured: `herald work --max-rate`
/// is the ceiling; a project quota answer lowers the rate, and while FCM accepts it rises again
/// a little each second (additive increase, multiplicative decrease, as TCP finds a link's rate).
///
/// The state is two numbers every worker of the project shares through herald.project_rates:
/// the rate set at the last lowering (`adapted`) and when (`at`). The rate in force at any
/// moment follows from them, so raising it needs no writes:
///
///     rate(now) = min(ceiling, adapted + max(1, increase * adapted) * (now - at))     (increase: 2 % a second, at least 1/s)
///
/// Until the project's first quota answer (nothing lowered yet) a process does not open at the
/// ceiling: it starts at `startRate` (1,000 a second, or the ceiling if lower) and doubles every
/// half second from its start, reaching 10,000 in under two seconds, so a pool meeting a quota
/// far below --max-rate meets it with a small burst, not a full one.
///
/// A lowering sets `adapted` to `decrease` times the rate in force, or, when FCM accepted less
/// than that just before (`accepted`, what the pool's processes saw delivered over the last two
/// seconds at most), to what it accepted, but never below a tenth of the rate in force: a first
/// quota answer far above the real quota comes down in a step or two, not fifteen.
public struct AdaptiveRate: Sendable, Equatable {
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

    public init(ceiling: Double) { self.ceiling = ceiling }

    /// The rate in force at `now`, from the shared state (nil: never lowered). `started`: when
    /// this process started (nil: it opens at the ceiling).
    public func rate(adapted: Double?, at: Double?, now: Double, started: Double? = nil) -> Double {
        guard ceiling > 0 else { return 0 }
        guard let adapted, let at, adapted.isFinite, at.isFinite else {
            guard let started, now >= started, startRate < ceiling else { return ceiling }
            let doublings = min(64, (now - started) / doubling)
            return min(ceiling, startRate * pow2(doublings))
        }
        let grown = adapted + max(0, now - at) * max(1, adapted * increase)
        return min(ceiling, max(floor, grown))
    }

    /// 2^x without Foundation.
    private func pow2(_ x: Double) -> Double {
        var result = 1.0
        var whole = Int(x.rounded(.down))
        while whole > 0 { result *= 2; whole -= 1 }
        let fraction = x - x.rounded(.down)
        return result * (1 + fraction)  // linear between doublings
    }

    /// The rate to set after a project quota answer at `now`, or nil when the last lowering was
    /// less than `episode` ago (the same episode: already lowered).
    public func lowered(adapted: Double?, at: Double?, now: Double, accepted: Double, started: Double? = nil) -> Double? {
        guard ceiling > 0 else { return nil }
        if let at, at.isFinite, now - at < episode, now >= at { return nil }
        let current = rate(adapted: adapted, at: at, now: now, started: started)
        var next = current * decrease
        // Not finite: not known (too short a time to tell), so it bounds nothing.
        let seen = accepted.isFinite ? max(0, accepted) : Double.infinity
        if seen < next { next = max(seen, current * 0.1) }
        return min(ceiling, max(floor, next))
    }
}
