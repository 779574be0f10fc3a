import Logging
import Testing
@testable import Worker

/// Which worker of a pool takes a project up first: the same answer in every process, spread
/// evenly, and every project its own for a worker alone or one whose place is not known.
@Suite struct ProjectOwnershipTests {
    let names = (1...1000).map { "app-\($0)" }

    @Test func everyProcessOfThePoolNamesTheSameOwner() {
        // Fixed figures: a hash seeded per process (Swift's own) would name other owners in
        // another process, and two workers would both take every project up.
        #expect(StoreProjects.owner(of: "app-1", among: 2) == StoreProjects.owner(of: "app-1", among: 2))
        #expect(names.map { StoreProjects.owner(of: $0, among: 3) } == names.map { StoreProjects.owner(of: $0, among: 3) })
        #expect(StoreProjects.owner(of: "", among: 2) == Int(0xcbf2_9ce4_8422_2325 as UInt64 % 2))
    }

    @Test(arguments: [2, 3, 8])
    func aThousandProjectsAreSpreadEvenly(processes: Int) {
        var counts = Array(repeating: 0, count: processes)
        for name in names { counts[StoreProjects.owner(of: name, among: processes)] += 1 }
        let fair = 1000 / processes
        // Within a fifth of an even share each: one worker never takes up most of them.
        #expect(counts.allSatisfy { abs($0 - fair) <= fair / 5 }, "\(counts)")
    }

    @Test func aWorkerAloneOrOfUnknownPlaceOwnsEveryProject() {
        func owned(index: Int?, of processes: Int) -> Int {
            var configuration = WorkerConfiguration(databaseURL: "", credentialsPath: "")
            configuration.poolProcesses = processes
            configuration.poolIndex = index
            let projects = StoreProjects(configuration: configuration, ring: ProjectKeyRing(), names: nil, unaddressed: nil,
                                         log: Logger(level: .error))
            return names.filter { projects.owns($0) }.count + (projects.owns(nil) ? 1 : 0)
        }
        #expect(owned(index: nil, of: 2) == 1001)
        #expect(owned(index: 0, of: 1) == 1001)
        // Two workers: each owns its share, the jobs of no project both.
        let first = owned(index: 0, of: 2), second = owned(index: 1, of: 2)
        #expect(first + second == 1002)
        #expect(first > 1 && second > 1)
    }
}
