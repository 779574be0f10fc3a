/// Whether the project's quota window is spent, told from the answers alone: a value type with
/// time passed in, one per project in the sender (inside `SenderMachine`).
///
/// FCM counts a project's quota per minute, the minutes not aligned to the clock, and past it
/// answers 429 "until the quota is refilled in the following minute". Once an answer stated the
/// limit, every pool paces at its share (`AdaptiveRate.pace`). Against a quota that refills
/// continuously that is the end of the 429s; against a window that is already spent, every send
/// is refused whatever the pace, and a pool that goes on at the stated rate draws a 429 for
/// every message until the window ends (about a third of a drain's requests: docs/fcm-limits.md,
/// "A spent minute"). So:
///
/// - sends paced at the stated limit start `settle` seconds after the limit was first stated
///   here (what was claimed, in flight or sent by another process at the old rate has been
///   answered by then);
/// - `refusalsToHold` project quota answers in a row to such sends, every one sent after the
///   last send FCM accepted (by the time they were sent, so answers arriving out of order do not
///   mix a window's two sides), mean the window is spent: a `Change.spent` hold, until the
///   latest the window can last (`windowSeconds` after the first refusal since the last
///   acceptance, which the window began before) plus `margin`;
/// - while held, `probe(now:)` lets about one send through every `probeSpacing`, and the first
///   accepted send made since the hold began is a `Change.renewed`: a new window, paced again;
/// - the hold ends by itself at its end, and sends are paced again from then.
///
/// A continuously refilled quota paced at 95 % accepts nearly everything, so no run forms; if one
/// did, the hold costs a probe's second, since the first probe is accepted.
struct QuotaWindowWatch: Sendable {
    struct Settings: Sendable, Equatable {
        /// After the limit is first stated, sends are taken for paced this much later.
        var settle = 1.0
        /// Quota answers in a row to paced sends, nothing accepted among them, that hold.
        var refusalsToHold = 5
        /// While held, a send is let through at most this often by this process (the claims of
        /// every pool together come about one a second; a job claimed before the hold is put
        /// back instead).
        var probeSpacing = 0.5
        /// Added to the hold's end: answers' latency and clocks.
        var margin = 1.0
        /// A hold lasts at most this long (a stated unit of an hour or a day).
        var longest = 3600.0
    }

    /// A hold in force: since when (sends made before it say nothing of the new window), until
    /// when at the latest, and this process's last probe.
    struct Hold: Sendable, Equatable {
        var since: Double
        var until: Double
        var lastProbe = -Double.infinity
    }

    enum Change: Sendable, Equatable {
        /// Hold the project's sends until `until`; `seenAt`: when the last refused send of the
        /// run was sent.
        case spent(until: Double, seenAt: Double)
        /// A probe sent at `seenAt` was accepted: pace at the stated limit again.
        case renewed(seenAt: Double)
    }

    let settings: Settings
    /// The stated limit (messages a second) and its window (seconds), as last stated.
    private(set) var stated: Double?
    private(set) var windowSeconds = 60.0
    /// Sends made from this time on are paced at the stated limit (nil: none stated here yet).
    private(set) var pacedSince: Double?
    private(set) var hold: Hold?
    /// When the latest send FCM accepted was sent.
    private var lastAcceptedSent = -Double.infinity
    /// The first quota answer since then: when its send was made and when it came.
    private var firstRefusal: (sent: Double, answered: Double)?
    /// The run of refused paced sends: how many, and when the first and last were sent.
    private(set) var run = 0
    private var runFirstSent = 0.0
    private var runLastSent = 0.0

    init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// Whether the hold is in force at `now` (it ends by itself at its end).
    func isHeld(at now: Double) -> Bool { hold.map { $0.until > now } ?? false }

    /// A quota answer stated the project's limit (`perSecond`, counted over `window` seconds):
    /// sends are paced at it from `settle` on; a new figure starts the settling again.
    mutating func stated(_ perSecond: Double, window: Double, now: Double) {
        guard perSecond != stated || pacedSince == nil else { return }
        stated = perSecond
        windowSeconds = window > 0 && window.isFinite ? window : 60
        pacedSince = now + settings.settle
        run = 0
    }

    /// FCM accepted a send made at `sent`.
    mutating func accepted(sent: Double, now: Double) -> Change? {
        lastAcceptedSent = max(lastAcceptedSent, sent)
        if let first = firstRefusal, sent >= first.sent { firstRefusal = nil }
        if run > 0, sent >= runFirstSent { run = 0 }
        guard let held = hold else { return nil }
        if held.until <= now {
            ended(now: now)
            return nil
        }
        guard sent >= held.since else { return nil }
        // A send made during the hold went through: the window was renewed.
        hold = nil
        pacedSince = now
        run = 0
        return .renewed(seenAt: sent)
    }

    /// FCM answered a send made at `sent` with the project's quota answer (no Retry-After).
    mutating func refused(sent: Double, now: Double) -> Change? {
        if let held = hold {
            if held.until > now { return nil }
            ended(now: now)
        }
        guard sent > lastAcceptedSent else { return nil }
        if firstRefusal == nil { firstRefusal = (sent, now) }
        guard let pacedSince, sent >= pacedSince else { return nil }
        if run == 0 { runFirstSent = sent }
        run += 1
        runLastSent = max(runLastSent, sent)
        guard run >= settings.refusalsToHold else { return nil }
        // The window began before its first refusal came, so it ends a window's length after
        // that at the latest; a run that outlasted that is no window of this length: hold one.
        let bound = (firstRefusal?.answered ?? now) + windowSeconds
        let until = min(now + settings.longest, (bound > now ? bound : now + windowSeconds) + settings.margin)
        hold = Hold(since: now, until: until)
        run = 0
        return .spent(until: until, seenAt: runLastSent)
    }

    /// Whether a send may go out now: always, unless held; while held, one every `probeSpacing`.
    mutating func probe(now: Double) -> Bool {
        guard var held = hold else { return true }
        guard held.until > now else {
            ended(now: now)
            return true
        }
        guard now - held.lastProbe >= settings.probeSpacing else { return false }
        held.lastProbe = now
        hold = held
        return true
    }

    /// The hold ran out without an accepted probe: paced again from its end.
    private mutating func ended(now: Double) {
        if let held = hold { pacedSince = max(pacedSince ?? held.until, held.until) }
        hold = nil
        run = 0
        firstRefusal = nil
    }
}
