import Testing
import Queue

/// When the worker VACUUMs herald.jobs between autovacuum runs.
@Suite struct JobsVacuumPolicyTests {
    let policy = JobsVacuumPolicy()

    @Test func aSmallTableWaitsForTheMinimumOfDeadRows() {
        #expect(!policy.shouldVacuum(deadRows: 99_999, liveRows: 1_000), "a few dead rows: not worth a pass over the indexes")
        #expect(policy.shouldVacuum(deadRows: 100_000, liveRows: 1_000))
    }

    @Test func aLargeTableWaitsForItsShareOfDeadRows() {
        // 5,000,000 finished jobs kept for their retention: a pass costs more, so it waits for more.
        #expect(!policy.shouldVacuum(deadRows: 249_999, liveRows: 5_000_000))
        #expect(policy.shouldVacuum(deadRows: 250_000, liveRows: 5_000_000))
        #expect(!policy.shouldVacuum(deadRows: 100_000, liveRows: 5_000_000))
    }

    @Test func statisticsNotYetGatheredNeverVacuum() {
        #expect(!policy.shouldVacuum(deadRows: 0, liveRows: 0))
        #expect(!policy.shouldVacuum(deadRows: 0, liveRows: -1))
    }
}
