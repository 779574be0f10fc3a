import struct Foundation.Date

/// The `Retry-After` header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.
public enum RetryAfter {
    /// Seconds to wait from `now`, or nil when `value` is neither form.
    ///
    /// Accepts delta-seconds (`"120"`; a fraction such as `"1.5"` is tolerated) and the three
    /// HTTP-date forms: IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, the obsolete RFC 850
    /// `Sunday, 06-Nov-94 08:49:37 GMT` (a two-digit year more than 50 years ahead of `now` is
    /// read as the previous century) and asctime `Sun Nov  6 08:49:37 1994`. A negative delay or
    /// a date in the past gives 0. Names are matched without regard to case; no locale is used.
    public static func parse(_ value: String, now: Date) -> Double? {
        let bytes = Array(value.utf8)
        var start = 0
        var end = bytes.count
        while start < end, bytes[start] == 0x20 || bytes[start] == 0x09 { start += 1 }
        while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
        let text = bytes[start..<end]
        guard !text.isEmpty else { return nil }
        if let seconds = delta(text) { return max(0, seconds) }
        guard let date = HTTPDate.parse(text, now: now) else { return nil }
        return max(0, date - now.timeIntervalSince1970)
    }

    private static func delta(_ text: ArraySlice<UInt8>) -> Double? {
        var body = text
        var negative = false
        if body.first == UInt8(ascii: "-") {
            negative = true
            body = body.dropFirst()
        }
        guard let first = body.first, isDigit(first) else { return nil }
        var seenPoint = false
        var fractionDigits = 0
        for byte in body {
            if isDigit(byte) {
                if seenPoint { fractionDigits += 1 }
            } else if byte == UInt8(ascii: "."), !seenPoint {
                seenPoint = true
            } else {
                return nil
            }
        }
        if seenPoint && fractionDigits == 0 { return nil }
        guard let magnitude = Double(String(decoding: body, as: UTF8.self)) else { return nil }
        return negative ? -magnitude : magnitude
    }

    @inline(__always) static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
}

/// HTTP-date parsing without DateFormatter (locale-independent, no allocation of formatters).
enum HTTPDate {
    static let shortDays = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    static let longDays = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
    static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970 of an HTTP-date in any of its three forms.
    static func parse(_ text: ArraySlice<UInt8>, now: Date) -> Double? {
        var cursor = Cursor(bytes: text)
        guard let dayName = cursor.letters() else { return nil }
        if cursor.take(UInt8(ascii: ",")) {
            guard cursor.take(0x20) else { return nil }
            if shortDays.contains(dayName) {
                return imfFixdate(&cursor)
            }
            if longDays.contains(dayName) {
                return rfc850(&cursor, now: now)
            }
            return nil
        }
        guard shortDays.contains(dayName), cursor.take(0x20) else { return nil }
        return asctime(&cursor)
    }

    /// `06 Nov 1994 08:49:37 GMT` (after `Sun, `).
    private static func imfFixdate(_ c: inout Cursor) -> Double? {
        guard let day = c.digits(2), c.take(0x20), let month = c.month(), c.take(0x20),
              let year = c.digits(4), c.take(0x20), let time = c.time(), c.take(0x20), c.gmt(), c.atEnd
        else { return nil }
        return timestamp(year: year, month: month, day: day, time: time)
    }

    /// `06-Nov-94 08:49:37 GMT` (after `Sunday, `).
    private static func rfc850(_ c: inout Cursor, now: Date) -> Double? {
        guard let day = c.digits(2), c.take(UInt8(ascii: "-")), let month = c.month(), c.take(UInt8(ascii: "-")),
              let shortYear = c.digits(2), c.take(0x20), let time = c.time(), c.take(0x20), c.gmt(), c.atEnd
        else { return nil }
        let currentYear = civil(fromDays: Int((now.timeIntervalSince1970 / 86_400).rounded(.down))).year
        var year = currentYear - currentYear % 100 + shortYear
        if year > currentYear + 50 { year -= 100 }
        return timestamp(year: year, month: month, day: day, time: time)
    }

    /// `Nov  6 08:49:37 1994` (after `Sun `); the day may be space-padded or two digits.
    private static func asctime(_ c: inout Cursor) -> Double? {
        guard let month = c.month(), c.take(0x20) else { return nil }
        let day: Int
        if c.take(0x20) {
            guard let d = c.digits(1) else { return nil }
            day = d
        } else {
            guard let d = c.digits(2) else { return nil }
            day = d
        }
        guard c.take(0x20), let time = c.time(), c.take(0x20), let year = c.digits(4), c.atEnd else { return nil }
        return timestamp(year: year, month: month, day: day, time: time)
    }

    private static func timestamp(year: Int, month: Int, day: Int, time: (Int, Int, Int)) -> Double? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              (0...23).contains(time.0), (0...59).contains(time.1), (0...60).contains(time.2)
        else { return nil }
        let days = days(fromCivil: year, month, day)
        return Double(days * 86_400 + time.0 * 3600 + time.1 * 60 + time.2)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (the era-based algorithm: 400-year
    /// eras of 146,097 days, years starting in March so the leap day comes last).
    static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The inverse of `days(fromCivil:)`.
    static func civil(fromDays days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    struct Cursor {
        var bytes: ArraySlice<UInt8>
        var atEnd: Bool { bytes.isEmpty }

        mutating func take(_ byte: UInt8) -> Bool {
            guard bytes.first == byte else { return false }
            bytes = bytes.dropFirst()
            return true
        }

        /// A run of ASCII letters, lowercased.
        mutating func letters() -> String? {
            var out: [UInt8] = []
            while let b = bytes.first, (b | 0x20) >= UInt8(ascii: "a"), (b | 0x20) <= UInt8(ascii: "z") {
                out.append(b | 0x20)
                bytes = bytes.dropFirst()
            }
            return out.isEmpty ? nil : String(decoding: out, as: UTF8.self)
        }

        /// Exactly `count` digits.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count >= count else { return nil }
            var value = 0
            for b in bytes.prefix(count) {
                guard RetryAfter.isDigit(b) else { return nil }
                value = value * 10 + Int(b - 0x30)
            }
            bytes = bytes.dropFirst(count)
            return value
        }

        mutating func month() -> Int? {
            guard let name = letters(), let index = HTTPDate.months.firstIndex(of: name) else { return nil }
            return index + 1
        }

        /// `hh:mm:ss`.
        mutating func time() -> (Int, Int, Int)? {
            guard let h = digits(2), take(UInt8(ascii: ":")), let m = digits(2), take(UInt8(ascii: ":")),
                  let s = digits(2) else { return nil }
            return (h, m, s)
        }

        mutating func gmt() -> Bool { letters() == "gmt" }
    }
}
