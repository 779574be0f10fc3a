import Testing
@testable import Worker

/// When the worker VACUUMs herald.jobs between autovacuum runs.
@Suite struct JobsVacuumPolicyTests {
    let policy = JobsVacuumPolicy()

    @Test func aFewDeadRowsAreNotWorthAPass() {
        #expect(!policy.shouldVacuum(deadRows: 99_999, lastPass: nil), "a few dead rows: not worth a pass over the indexes")
        #expect(policy.shouldVacuum(deadRows: 100_000, lastPass: nil))
    }

    @Test func aLongPassIsFollowedByAProportionalRest() {
        // A 2 s pass (a large table's indexes) may take at most a fifth of the time: the next
        // waits 8 s, however many dead rows pile up meanwhile.
        #expect(!policy.shouldVacuum(deadRows: 1_000_000, lastPass: (seconds: 2, endedAgo: 7.9)))
        #expect(policy.shouldVacuum(deadRows: 1_000_000, lastPass: (seconds: 2, endedAgo: 8)))
        // A short pass (a small table) leaves the minimum of dead rows as the only rule.
        #expect(policy.shouldVacuum(deadRows: 100_000, lastPass: (seconds: 0.2, endedAgo: 1)))
        #expect(!policy.shouldVacuum(deadRows: 99_999, lastPass: (seconds: 0.2, endedAgo: 60)))
    }

    @Test func statisticsNotYetGatheredNeverVacuum() {
        #expect(!policy.shouldVacuum(deadRows: 0, lastPass: nil))
        #expect(!policy.shouldVacuum(deadRows: -1, lastPass: nil))
    }
}
