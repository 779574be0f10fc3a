import Foundation
import Lifecycle
import Testing

/// The group every long-running part runs in: start order, reverse stop order, the bound on the
/// shutdown, the first failure. Fake services write what happens to them in one journal.
@Suite struct ServiceGroupTests {
    /// Lines in the order they happened, and a wait for one to appear (with a deadline).
    final class Journal: @unchecked Sendable {
        private let condition = NSCondition()
        private var lines: [String] = []

        func write(_ line: String) {
            condition.lock()
            lines.append(line)
            condition.broadcast()
            condition.unlock()
        }

        var all: [String] {
            condition.lock()
            defer { condition.unlock() }
            return lines
        }

        /// Waits up to `seconds` for `line`; true when it came.
        func waitFor(_ line: String, seconds: Double = 10) -> Bool {
            let deadline = Date(timeIntervalSinceNow: seconds)
            condition.lock()
            defer { condition.unlock() }
            while !lines.contains(line) {
                if !condition.wait(until: deadline) { return lines.contains(line) }
            }
            return true
        }
    }

    struct Refusal: Error, Equatable { var reason: String }

    final class FakeService: Service, @unchecked Sendable {
        enum Behaviour {
            /// Runs until asked to stop, then returns.
            case untilShutdown
            /// Returns as soon as it has started.
            case returnsAtOnce
            /// Throws as soon as it has started.
            case failsAtOnce(Refusal)
            /// Runs until asked to stop, then throws.
            case failsOnShutdown(Refusal)
            /// Does not hear the request to stop: returns only when `release` is signalled.
            case ignoresShutdown
        }

        let name: String
        let behaviour: Behaviour
        let journal: Journal
        let stopAsked = ShutdownLatch()
        let release = ShutdownLatch()

        init(_ name: String, _ behaviour: Behaviour = .untilShutdown, journal: Journal) {
            self.name = name
            self.behaviour = behaviour
            self.journal = journal
        }

        func run() throws {
            journal.write("started \(name)")
            defer { journal.write("returned \(name)") }
            switch behaviour {
            case .untilShutdown: stopAsked.wait()
            case .returnsAtOnce: return
            case .failsAtOnce(let refusal): throw refusal
            case .failsOnShutdown(let refusal):
                stopAsked.wait()
                throw refusal
            case .ignoresShutdown: release.wait()
            }
        }

        func beginShutdown() {
            journal.write("asked \(name)")
            stopAsked.signal()
        }
    }

    /// Runs `group` on a thread of its own; the report arrives through the returned wait.
    final class Running: @unchecked Sendable {
        private let done = ShutdownLatch()
        private var report: ServiceGroup.Report?
        private let lock = NSLock()

        init(_ group: ServiceGroup) {
            let thread = Thread { [self] in
                let outcome = group.run()
                lock.lock(); report = outcome; lock.unlock()
                done.signal()
            }
            thread.start()
        }

        /// The report, once the group's `run()` has returned, waiting up to `seconds`.
        func report(within seconds: Double = 10) -> ServiceGroup.Report? {
            guard done.wait(until: Date(timeIntervalSinceNow: seconds)) else { return nil }
            lock.lock(); defer { lock.unlock() }
            return report
        }
    }

    @Test func stopsInReverseOrderEachAfterTheOneAfterItReturned() throws {
        let journal = Journal()
        let services = ["store-like", "sender-like", "server-like"].map { FakeService($0, journal: journal) }
        let group = ServiceGroup(services.map { .init($0) }, maximumShutdownDuration: 10)
        let running = Running(group)
        for service in services { #expect(journal.waitFor("started \(service.name)")) }
        group.beginShutdown()
        let report = try #require(running.report())
        #expect(report.failure == nil)
        #expect(report.stillRunning.isEmpty)
        let stops = journal.all.filter { $0.hasPrefix("asked") || $0.hasPrefix("returned") }
        #expect(stops == ["asked server-like", "returned server-like", "asked sender-like", "returned sender-like",
                          "asked store-like", "returned store-like"])
    }

    @Test func aServiceThatReturnsEndsTheGroupUnlessItsReturnIsIgnored() throws {
        let journal = Journal()
        let vacuum = FakeService("vacuum", .returnsAtOnce, journal: journal)
        let carrier = FakeService("carrier", journal: journal)
        let store = FakeService("store", journal: journal)
        let group = ServiceGroup([.init(vacuum, whenReturns: .ignore), .init(carrier), .init(store)], maximumShutdownDuration: 10)
        let running = Running(group)
        #expect(journal.waitFor("returned vacuum"))
        #expect(journal.waitFor("started store"))
        // The vacuum's return is not the group's end: nobody is asked to stop...
        #expect(!journal.all.contains { $0.hasPrefix("asked") })
        // ...until the store (its return ends the group) returns.
        store.stopAsked.signal()
        let report = try #require(running.report())
        #expect(report.failure == nil && report.stillRunning.isEmpty)
        #expect(journal.all.contains("asked carrier") && journal.all.contains("returned carrier"))
        #expect(!journal.all.contains("asked vacuum"), "a service that returned is not asked again")
    }

    @Test func reportsTheFirstFailureAndStopsTheOthers() throws {
        let journal = Journal()
        let first = FakeService("first", .failsOnShutdown(Refusal(reason: "later, during the shutdown")), journal: journal)
        let failing = FakeService("failing", .failsAtOnce(Refusal(reason: "cannot listen")), journal: journal)
        let last = FakeService("last", journal: journal)
        let group = ServiceGroup([.init(first), .init(failing), .init(last)], maximumShutdownDuration: 10)
        let report = try #require(Running(group).report())
        let failure = try #require(report.failure)
        #expect(failure.service == "failing")
        #expect(failure.error as? Refusal == Refusal(reason: "cannot listen"))
        #expect(failure.description == "failing: Refusal(reason: \"cannot listen\")")
        #expect(journal.all.contains("returned first") && journal.all.contains("returned last"))
        #expect(report.stillRunning.isEmpty)
    }

    @Test func theShutdownIsBoundedAndNamesWhatDidNotStop() throws {
        let journal = Journal()
        let first = FakeService("first", journal: journal)
        let stubborn = FakeService("stubborn", .ignoresShutdown, journal: journal)
        let last = FakeService("last", journal: journal)
        defer { stubborn.release.signal() }
        let group = ServiceGroup([.init(first), .init(stubborn), .init(last)], maximumShutdownDuration: 0.3)
        let running = Running(group)
        #expect(journal.waitFor("started last"))
        group.beginShutdown()
        // Well within the 10 s wait, though the stubborn service never returns.
        let report = try #require(running.report(within: 10), "the group waited past its maximum shutdown duration")
        #expect(report.stillRunning.contains("stubborn"))
        #expect(!report.stillRunning.contains("last"), "a service that stopped in time is not named")
        #expect(report.failure == nil)
        #expect(journal.all.contains("returned last"))
        // The one before it is still asked, though no time is left to wait for it, and stops.
        #expect(journal.all.contains("asked first"))
        #expect(journal.waitFor("returned first"))
        #expect(!journal.all.contains("returned stubborn"))
    }

    @Test func startedAheadTheGroupRunsBesideTheCallersOwnWork() throws {
        // herald work: the group starts the admin endpoint, the supervisor keeps the calling thread.
        let journal = Journal()
        let admin = FakeService("admin", journal: journal)
        let group = ServiceGroup([.init(admin)], maximumShutdownDuration: 10)
        group.start()
        #expect(journal.waitFor("started admin"))
        group.start()  // a second start starts nothing more
        #expect(!journal.all.contains("asked admin"), "start() does not stop anything")
        group.beginShutdown()
        let report = group.run()
        #expect(report.stillRunning.isEmpty && report.failure == nil)
        #expect(journal.all.filter { $0 == "started admin" }.count == 1)
        #expect(journal.all.suffix(2) == ["asked admin", "returned admin"])
    }

    @Test func aShutdownAskedBeforeTheStartEndsAtOnce() throws {
        let journal = Journal()
        let service = FakeService("only", journal: journal)
        let group = ServiceGroup([.init(service)], maximumShutdownDuration: 10)
        group.beginShutdown()
        let report = try #require(Running(group).report())
        #expect(report.stillRunning.isEmpty && report.failure == nil)
        #expect(journal.all.contains("asked only") && journal.all.contains("returned only"))
    }
}
