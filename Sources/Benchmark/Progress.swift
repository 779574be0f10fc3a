import Foundation
import Logging
import Postgres

/// Watches a phase over its own connection: first the moment of the first claim (polled every
/// 2 ms, in PostgreSQL's clock), then the completed count every second (a count over the whole table, kept rare so the
/// watch costs the phase little), drawn on stderr.
public final class Progress: Sendable {
    let url: String
    let afterID: Int
    let total: Int
    let label: String
    private let stopping = Locked(false)
    private let firstClaim = Locked<Double?>(nil)
    private let backendCPU = Locked(0.0)
    /// CPU seconds of this watch's own backend, read as it finished (to leave it out of the phase's).
    public var backendCPUSeconds: Double { backendCPU.value }
    private let finished = DispatchSemaphore(value: 0)

    public init(url: String, afterID: Int, total: Int, label: String) {
        self.url = url; self.afterID = afterID; self.total = total; self.label = label
    }

    public func start() {
        let thread = Thread { [self] in
            defer { finished.signal() }
            do { try watch() } catch { StandardStreams.write("herald bench: progress: \(error)\n", to: 2) }
        }
        thread.name = "herald-bench-progress"
        thread.start()
    }

    /// Stops watching; returns the first claim's time (seconds since 1970, PostgreSQL's clock).
    public func stop() -> Double? {
        stopping.withLock { $0 = true }
        finished.wait()
        return firstClaim.value
    }

    private func watch() throws {
        let connection = try PGConnection(url: url)
        let backend = try BenchmarkJobs.watchSession(connection)
        defer {
            // Read while the connection is still open: once it closes, the backend exits.
            withExtendedLifetime(connection) {
                if let backend, let seconds = ServerCPU.processSeconds(backend) { backendCPU.withLock { $0 = seconds } }
            }
        }
        while !stopping.value && firstClaim.value == nil {
            let result = try BenchmarkJobs.firstActivity(connection, afterID: afterID)
            if result.claimed { firstClaim.withLock { $0 = result.now } }
            else { usleep(2000) }
        }
        let tty = isatty(2) == 1
        let started = monotonicSeconds()
        var lastLine = started
        var lineDone = 0
        var lastDone = 0
        var lastAt = started
        var drawn = false
        while !stopping.value {
            // The count walks every job of the phase (160 ms a call beside 5,000,000 finished
            // rows): without a terminal it runs only when a line is due, every 3 s.
            if tty || monotonicSeconds() - lastLine >= 3 {
                let done = try BenchmarkJobs.completed(connection, afterID: afterID)
                let now = monotonicSeconds()
                if tty {
                    let rate = now > lastAt ? Double(done - lastDone) / (now - lastAt) : 0
                    let width = 30
                    let filled = total > 0 ? min(width, done * width / total) : 0
                    let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
                    let percent = total > 0 ? done * 100 / total : 0
                    StandardStreams.write("\r\(label) [\(bar)] \(percent)% \(grouped(done))/\(grouped(total))  \(grouped(Int(rate)))/s   ", to: 2)
                    drawn = true
                } else {
                    let average = Double(done - lineDone) / (now - lastLine)
                    StandardStreams.write("herald bench: \(label): \(grouped(done)) of \(grouped(total)) delivered (\(grouped(Int(average)))/s over the last \(fixed(now - lastLine, 0)) s)\n", to: 2)
                    lastLine = now
                    lineDone = done
                }
                lastDone = done
                lastAt = now
            }
            var slept = 0.0
            while slept < 1 && !stopping.value { usleep(20_000); slept += 0.02 }
        }
        if drawn { StandardStreams.write("\n", to: 2) }
    }
}
