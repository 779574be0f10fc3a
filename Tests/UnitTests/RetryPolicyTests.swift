import Foundation
import Testing
@testable import FCM
@testable import Worker
import Queue

@Suite struct RetryAfterTests {
    /// 1994-11-06 08:49:37 UTC, the date of RFC 9110's examples.
    static let example = 784_111_777.0

    @Test(arguments: [("120", 120.0), (" 120 ", 120), ("0", 0), ("-5", 0), ("1.5", 1.5), ("86400", 86_400)])
    func deltaSeconds(_ text: String, _ seconds: Double) {
        #expect(RetryAfter.parse(text, now: Date(timeIntervalSince1970: 0)) == seconds)
    }

    @Test(arguments: ["", "  ", "abc", "12a", "1.", ".5", "1e3", "+5", "120 s", "Sun, 06 Nov 1994", "Sunday", "Sun, 06 Nov 1994 08:49:37 UTC",
                      "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
                      "Sun, 6 Nov 1994 08:49:37 GMT", "Fun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
                      "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994", "Mon, 29 Feb 2100 00:00:00 GMT"])
    func garbageIsNil(_ text: String) {
        #expect(RetryAfter.parse(text, now: Date(timeIntervalSince1970: Self.example)) == nil)
    }

    @Test(arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT",      // IMF-fixdate
        "Sunday, 06-Nov-94 08:49:37 GMT",     // obsolete RFC 850
        "Sun Nov  6 08:49:37 1994",           // asctime
        "Sun Nov 06 08:49:37 1994",
        "sun, 06 nov 1994 08:49:37 gmt",
    ])
    func httpDates(_ text: String) {
        #expect(RetryAfter.parse(text, now: Date(timeIntervalSince1970: Self.example - 90)) == 90)
        // A date in the past means "now".
        #expect(RetryAfter.parse(text, now: Date(timeIntervalSince1970: Self.example + 3600)) == 0)
    }

    @Test func twoDigitYearsStayWithinFiftyYears() {
        // Seen in 2030: "35" is 2035 (5 years ahead), "94" is 1994 (2094 would be 64 years ahead).
        let now = Date(timeIntervalSince1970: 1_893_456_000)  // 2030-01-01 00:00:00 UTC
        #expect(RetryAfter.parse("Monday, 01-Jan-35 00:00:00 GMT", now: now) == 157_766_400)
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == 0)
    }

    @Test func leapDays() {
        let now = Date(timeIntervalSince1970: 1_709_164_800 - 10)  // 2024-02-29 00:00:00 UTC, less 10 s
        #expect(RetryAfter.parse("Thu, 29 Feb 2024 00:00:00 GMT", now: now) == 10)
        #expect(RetryAfter.parse("Tue, 29 Feb 2000 00:00:00 GMT", now: Date(timeIntervalSince1970: 0)) == 951_782_400)
    }

    @Test func agreesWithAnIndependentFormatter() {
        // Foundation's formatter (fixed locale and zone) as the reference, over four centuries.
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        var random = SplitMix64(seed: 42)
        for _ in 0..<2000 {
            let seconds = Double(Int64(random.next() % 12_600_000_000) - 2_208_988_800)  // 1900 ... 2300
            let text = formatter.string(from: Date(timeIntervalSince1970: seconds))
            #expect(RetryAfter.parse(text, now: Date(timeIntervalSince1970: seconds - 1)) == 1, "\(text)")
        }
    }
}

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy()

    @Test func defaultsAreDocumented() {
        #expect(policy == RetryPolicy(base: 1, factor: 2, cap: 3600, jitter: 0.5, quotaMinimum: 60))
    }

    @Test(arguments: [(1, 1), (2, 2), (3, 4), (4, 8), (10, 512), (12, 2048), (13, 3600), (1000, 3600), (Int.max, 3600), (0, 1), (-3, 1)] as [(Int, Double)])
    func exponentialFloorsUpToTheCap(_ attempt: Int, _ floor: Double) {
        #expect(policy.delay(attempt: attempt, retryAfter: nil, quota: false, random: 0) == floor)
        #expect(policy.floor(attempt: attempt, retryAfter: nil, quota: false) == floor)
    }

    @Test func neverSoonerThanRetryAfter() {
        #expect(policy.delay(attempt: 1, retryAfter: 120, quota: false, random: 0) == 120)
        #expect(policy.delay(attempt: 12, retryAfter: 120, quota: false, random: 0) == 2048)
        // Retry-After wins over the cap, within a day.
        #expect(policy.delay(attempt: 1, retryAfter: 7200, quota: false, random: 0) == 7200)
        #expect(policy.delay(attempt: 1, retryAfter: 1e12, quota: false, random: 0) == 86_400)
        #expect(policy.delay(attempt: 1, retryAfter: -5, quota: false, random: 0) == 1)
        #expect(policy.delay(attempt: 1, retryAfter: .nan, quota: false, random: 0) == 1)
    }

    @Test func quotaWithoutRetryAfterWaitsAMinute() {
        #expect(policy.delay(attempt: 1, retryAfter: nil, quota: true, random: 0) == 60)
        #expect(policy.delay(attempt: 7, retryAfter: nil, quota: true, random: 0) == 64)
        // FCM's own Retry-After is honoured as given.
        #expect(policy.delay(attempt: 1, retryAfter: 5, quota: true, random: 0) == 5)
    }

    @Test func jitterOnlyAdds() {
        var random = SplitMix64(seed: 7)
        for attempt in 1...20 {
            for retryAfter in [nil, 0.5, 30, 5000] as [Double?] {
                for quota in [false, true] {
                    let floor = policy.floor(attempt: attempt, retryAfter: retryAfter, quota: quota)
                    let delay = policy.delay(attempt: attempt, retryAfter: retryAfter, quota: quota, using: &random)
                    #expect(delay >= floor)
                    #expect(delay < floor * 1.5)
                }
            }
        }
        #expect(policy.delay(attempt: 1, retryAfter: nil, quota: false, random: 1) == 1.5)
        #expect(policy.delay(attempt: 1, retryAfter: nil, quota: false, random: 7) == 1.5)
        #expect(policy.delay(attempt: 1, retryAfter: nil, quota: false, random: -1) == 1)
    }

    @Test(arguments: [(1, nil, false), (3, nil, false), (1, 30.0, false), (1, nil, true)] as [(Int, Double?, Bool)])
    func thousandJobsFailingTogetherSpreadOut(_ attempt: Int, _ retryAfter: Double?, _ quota: Bool) {
        var random = SplitMix64(seed: 2024)
        let floor = policy.floor(attempt: attempt, retryAfter: retryAfter, quota: quota)
        let delays = (0..<1000).map { _ in policy.delay(attempt: attempt, retryAfter: retryAfter, quota: quota, using: &random) }
        let spread = delays.max()! - delays.min()!
        #expect(delays.allSatisfy { $0 >= floor })
        #expect(spread >= 0.3 * floor)
        // Not a few clumps either: the 1,000 land in most of ten equal slices of the window.
        let slices = Set(delays.map { Int(($0 - floor) / (floor * 0.05)) })
        #expect(slices.count >= 9)
    }

    @Test func splitMix64IsTheReferenceSequence() {
        var random = SplitMix64(seed: 0)
        #expect(random.next() == 0xE220_A839_7B1D_CDAF)
        #expect(random.next() == 0x6E78_9E6A_A1B9_65F4)
        var a = SplitMix64(seed: 99), b = SplitMix64(seed: 99)
        for _ in 0..<100 { #expect(a.nextUnit() == b.nextUnit()) }
        for _ in 0..<1000 {
            let u = a.nextUnit()
            #expect(u >= 0 && u < 1)
        }
    }
}

@Suite struct JitterRandomTests {
    /// Retry jitter spreads a batch of failures over the window only if the draws are spread:
    /// 20,000 draws of [0, 1) fall into ten equal bins within 10 % of an even share each, and
    /// two generators seeded by the system draw different sequences (pools do not retry in step).
    @Test func drawsAreEvenAndDifferBetweenGenerators() {
        var random = JitterRandom()
        var bins = [Int](repeating: 0, count: 10)
        for _ in 0..<20_000 {
            let r = Double.random(in: 0..<1, using: &random)
            #expect(r >= 0 && r < 1)
            bins[min(9, Int(r * 10))] += 1
        }
        for count in bins { #expect((1_800...2_200).contains(count), "bins: \(bins)") }
        var a = JitterRandom(), b = JitterRandom()
        #expect((0..<4).map { _ in a.next() } != (0..<4).map { _ in b.next() })
        var c = JitterRandom(seed: 7), d = JitterRandom(seed: 7)
        #expect(c.next() == d.next())
    }
}
