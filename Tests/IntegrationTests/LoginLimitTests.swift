import Dashboard
import Foundation
import Testing
import TestSupport

/// A clock the test moves by hand.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds = Date().timeIntervalSince1970
    var now: Double { lock.lock(); defer { lock.unlock() }; return seconds }
    func advance(_ by: Double) { lock.lock(); seconds += by; lock.unlock() }
}

/// Guessing the dashboard token: 10 wrong tries a minute per address, then 429 until the window passes.
@Suite struct LoginLimitTests {
    static let form = ["Content-Type": "application/x-www-form-urlencoded"]

    @Test func wrongTokensAreLimitedPerAddressAndCountedAndTheRightOneWorksAfterTheWindow() throws {
        let clock = ManualClock()
        let stack = try DashboardStack { $0.clock = { clock.now } }
        defer { stack.close() }
        for attempt in 1...10 {
            let answer = try stack.post("/login", headers: Self.form, body: "token=guess-\(attempt)&next=%2F")
            #expect(answer.status == 401, "attempt \(attempt): \(answer.status)")
        }
        // The 11th try, even with the right token, waits.
        let limited = try stack.post("/login", headers: Self.form, body: "token=\(DashboardStack.token)&next=%2F")
        #expect(limited.status == 429)
        let wait = try #require(limited.headers["retry-after"].flatMap { Int($0) })
        #expect(wait > 0 && wait <= 60)
        #expect(limited.body.contains("Too many wrong tokens"))
        #expect(limited.headers["set-cookie"] == nil, "no session while limited")
        // The API shares the budget: a bearer token from that address waits too.
        let api = try stack.get("/api/queues", headers: ["Authorization": "Bearer wrong-guess"])
        #expect(api.status == 429 && api.headers["retry-after"] != nil)

        // Counted on /metrics (read from another address's point of view: the clock moves on first).
        clock.advance(Double(wait))
        let metrics = try stack.get("/metrics", headers: stack.bearer)
        #expect(metrics.status == 200, "\(metrics.body)")
        #expect(metrics.body.contains("herald_dashboard_login_failures_total 10"), "\(metrics.body)")
        #expect(metrics.body.contains("herald_dashboard_logins_refused_total 2"), "\(metrics.body)")
        let check = try promtoolCheckMetrics(metrics.body)
        #expect(check.status == 0, "\(check.output)")

        // After the window the right token logs in.
        #expect(try stack.login().hasPrefix("herald_session="))
    }

    @Test func theWindowSlides() throws {
        let clock = ManualClock()
        let stack = try DashboardStack { $0.clock = { clock.now }; $0.loginLimit = 3; $0.loginWindow = 60 }
        defer { stack.close() }
        for _ in 1...2 { #expect(try stack.post("/login", headers: Self.form, body: "token=nope&next=%2F").status == 401) }
        clock.advance(50)
        #expect(try stack.post("/login", headers: Self.form, body: "token=nope&next=%2F").status == 401)
        #expect(try stack.post("/login", headers: Self.form, body: "token=nope&next=%2F").status == 429)
        // 10 s later the first two failures have left the window: two more tries are allowed.
        clock.advance(10)
        #expect(try stack.post("/login", headers: Self.form, body: "token=nope&next=%2F").status == 401)
        #expect(try stack.post("/login", headers: Self.form, body: "token=nope&next=%2F").status == 401)
        #expect(try stack.post("/login", headers: Self.form, body: "token=\(DashboardStack.token)&next=%2F").status == 429)
    }
}
