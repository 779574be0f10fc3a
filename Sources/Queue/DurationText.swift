import Foundation

/// How `durationText` names its units: `letters` for terminals and logs (`3m05s`), `words` for
/// pages read by people (`3 min 5 s`).
public enum DurationUnits: Sendable {
    case letters, words
}

/// A length of time in its two largest units, rounded to the second: `45s`, `3m05s`, `14h02m`,
/// `2d03h` (with `.words`: `45 s`, `3 min 5 s`, `14 h 2 min`, `2 d 3 h`). `roundedDown` cuts to
/// the whole second below instead, for an age or a time left as it stands (an hour's pause a
/// moment after it began is `59m59s`, not yet `1h00m`); `tenths` shows a time under a minute to
/// a tenth of a second (`0.3s`), for ages that are often that short.
public func durationText(_ seconds: Double, units: DurationUnits = .letters, roundedDown: Bool = false,
                         tenths: Bool = false) -> String {
    let names = units == .letters ? (s: "s", m: "m", h: "h", d: "d", gap: "") : (s: "s", m: "min", h: "h", d: "d", gap: " ")
    if tenths && seconds < 60 && (roundedDown || seconds < 59.95) {
        return String(format: "%.1f", max(0, seconds)) + names.gap + names.s
    }
    let s = max(0, Int(roundedDown ? seconds.rounded(.down) : seconds.rounded()))
    func pair(_ big: Int, _ bigName: String, _ small: Int, _ smallName: String) -> String {
        let smallText = units == .letters ? String(format: "%02d", small) : String(small)
        return "\(big)\(names.gap)\(bigName)\(names.gap)\(smallText)\(names.gap)\(smallName)"
    }
    switch s {
    case ..<60: return "\(s)\(names.gap)\(names.s)"
    case ..<3600: return pair(s / 60, names.m, s % 60, names.s)
    case ..<86_400: return pair(s / 3600, names.h, s % 3600 / 60, names.m)
    default: return pair(s / 86_400, names.d, s % 86_400 / 3600, names.h)
    }
}
