import Foundation

/// Threads that each get ready, then start their measured work at the same moment: the shape of
/// the ceiling and sends-alone phases.
enum TogetherThreads {
    /// Runs `prepare(index)` on each of `count` threads named `name-index`; once all are ready
    /// and `beforeStart` has run, runs `work(index, prepared)` on all of them at once. Returns the
    /// wall seconds from that start to the last thread's end, and the threads' CPU seconds
    /// (their own clocks) over `work`.
    static func run<Prepared>(count: Int, name: String, prepare: @escaping @Sendable (Int) -> Prepared,
                              beforeStart: () -> Void = {},
                              work: @escaping @Sendable (Int, Prepared) -> Void) -> (seconds: Double, cpuSeconds: Double) {
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let cpu = Locked(0.0)
        for index in 0..<count {
            let thread = Thread {
                let prepared = prepare(index)
                ready.signal()
                go.wait()
                let cpuAtStart = threadCPUSeconds()
                work(index, prepared)
                let spent = threadCPUSeconds() - cpuAtStart
                cpu.withLock { $0 += spent }
                done.signal()
            }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
        for _ in 0..<count { ready.wait() }
        beforeStart()
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<count { go.signal() }
        for _ in 0..<count { done.wait() }
        return (Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9, cpu.value)
    }
}
