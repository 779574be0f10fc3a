/// How many requests a sender keeps in flight, following FCM's answer times (a delay-based
/// limiter, in the manner of TCP Vegas): when answers slow down because requests queue at FCM,
/// the window shrinks, so a new request (a one-time code behind a campaign) does not wait behind
/// a queue of Herald's own making; when answers are quick it grows back, up to `ceiling`
/// (`--concurrency`). Pure: every sample carries its time.
///
/// The base is the quickest answer seen lately (the lowest of the last two 10-second spans:
/// what an answer costs with nothing queued). Every `span` (100 ms, and at least 8 answers),
/// with `average` the mean answer time of the span:
///
///     limit = limit * clamp(max(base + slack, base * tolerance) / average, 0.5, 1) + sqrt(limit)
///
/// then kept between `floor` and `ceiling`. While answers take no more than `slack` (35 ms), or
/// half the base when that is more (an FCM 100 ms away: 50 ms), beyond the base, the window grows by its square root each span; past that it shrinks in
/// proportion, at most by half a span. It starts at `start` (256, the window that served a
/// prompt FCM before) and grows from there while answers stay steady (by half each span until
/// the first span that shows queueing, `startingUp`), up to `ceiling`
/// (`--concurrency`, 1,024 by default, a memory bound an operator may lower; docs/fcm-limits.md):
/// at FCM's real latency (tens of milliseconds, 100 ms slowed) a rate of 10,000 a second needs
/// 1,000 in flight (Little's law: rate times latency), more than a fixed 256 per process carried.
/// The claims' rate bounds what is actually in flight (rate times latency), so a window grown
/// past it costs nothing.
struct InFlightLimit: Sendable {
    let floor: Int
    let ceiling: Int
    /// Answer time allowed above the base before the window shrinks, in seconds.
    var slack = 0.035
    /// The share of the base allowed as queueing when it is more than `slack`: far from FCM, the
    /// answers' own spread (and Herald's turn on the cores at a rate that needs a large window)
    /// exceeds a fixed 35 ms without FCM queueing anything.
    var tolerance = 1.5
    var span = 0.1
    private(set) var limit: Double
    /// Until the first span that shows queueing, the window grows by half each span instead of
    /// by its square root (a slow start, in TCP's words, which is not slow): 256 reaches 1,024 in
    /// four spans, not thirty. A pool draining a few seconds' work against an FCM 100 ms away
    /// spent most of it below the window its rate needed.
    private(set) var startingUp = true
    private var spanStart: Double? = nil
    private var spanSum = 0.0
    private var spanCount = 0
    /// The quickest answers of the current and the previous 10-second span.
    private var minimum: (current: Double, previous: Double, since: Double) = (.infinity, .infinity, 0)

    init(floor: Int, ceiling: Int, start: Int? = nil) {
        self.ceiling = max(1, ceiling)
        self.floor = min(max(1, floor), self.ceiling)
        limit = Double(min(self.ceiling, max(self.floor, start ?? self.ceiling)))
    }

    /// The window now, a whole number of requests.
    var window: Int { Int(limit.rounded(.down)) }

    /// The quickest answer lately (nil before any).
    var base: Double? {
        let value = min(minimum.current, minimum.previous)
        return value.isFinite ? value : nil
    }

    /// One answer that took `seconds`, received at `now`. Returns true when the window changed.
    @discardableResult
    mutating func answered(after seconds: Double, now: Double) -> Bool {
        guard seconds.isFinite, seconds >= 0 else { return false }
        if now - minimum.since >= 10 { minimum = (.infinity, minimum.current, now) }
        minimum.current = min(minimum.current, seconds)
        if spanStart == nil { spanStart = now }
        spanSum += seconds
        spanCount += 1
        guard let start = spanStart, now - start >= span, spanCount >= 8, let base else { return false }
        let average = spanSum / Double(spanCount)
        spanStart = now
        spanSum = 0
        spanCount = 0
        let before = window
        let gradient = min(1, max(0.5, max(base + slack, base * tolerance) / max(average, 1e-6)))
        if gradient < 1 { startingUp = false }
        let grown = startingUp ? limit * 1.5 : limit * gradient + limit.squareRoot()
        limit = min(Double(ceiling), max(Double(floor), grown))
        return window != before
    }
}
