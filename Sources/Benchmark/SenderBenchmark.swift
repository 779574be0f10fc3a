import Foundation
import HTTPClient
import Queue

/// What the sends-alone phase measured.
public struct SenderResult: Sendable {
    public var requests: Int
    /// Answered 200.
    public var delivered: Int
    public var seconds: Double
    public var threads: Int
    public var concurrency: Int
    /// CPU of the sending threads (user + system, their own clocks).
    public var clientCPUSeconds: Double
    /// The first answer that was not a 200, to say why when some failed.
    public var firstFailure: String?
    public var requestsPerSecond: Double { seconds > 0 ? Double(requests) / seconds : 0 }
}

/// The sender's floor: the workers' HTTP client (`HTTPClient`, libcurl over HTTP/2) sending FCM v1
/// requests as fast as it can, `concurrency` in flight per thread, with no PostgreSQL, no claiming,
/// no validation and no bookkeeping. What a worker spends per message beyond this CPU is Herald's
/// own work around the send.
public enum SenderBenchmark {
    /// `bodies` are sent in turn (built before the clock starts); `headers` go with every request.
    public static func run(url: String, headers: [String], bodies: [[UInt8]], requests: Int, threads: Int, concurrency: Int,
                           configuration: HTTPClientConfiguration) throws -> SenderResult {
        let threads = max(1, threads)
        let concurrency = max(1, concurrency)
        precondition(!bodies.isEmpty, "SenderBenchmark needs at least one body")
        let delivered = Locked(0)
        let failure = Locked<String?>(nil)
        let setup = Locked<String?>(nil)

        let (seconds, clientCPUSeconds) = TogetherThreads.run(count: threads, name: "herald-sender", prepare: { _ -> HTTPClient? in
            do { return try HTTPClient(configuration: configuration) } catch {
                setup.withLock { $0 = $0 ?? "\(error)" }
                return nil
            }
        }, work: { index, client in
            // A client that could not start makes the phase fail: no thread measures then.
            guard let client, setup.value == nil else { return }
            let share = requests / threads + (index < requests % threads ? 1 : 0)
            var sent = 0, answered = 0, mine = 0
            while answered < share {
                while sent < share && sent - answered < concurrency {
                    client.submit(HTTPRequest(method: "POST", url: url, headers: headers, body: bodies[(index + sent * threads) % bodies.count]),
                                  tag: UInt64(sent))
                    sent += 1
                }
                for completion in client.poll(timeoutMilliseconds: 1000) {
                    answered += 1
                    switch completion.result {
                    case .success(let response) where response.status == 200:
                        mine += 1
                    case .success(let response):
                        failure.withLock { $0 = $0 ?? "HTTP \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))" }
                    case .failure(let error):
                        failure.withLock { $0 = $0 ?? "\(error)" }
                    }
                }
            }
            delivered.withLock { $0 += mine }
        })
        if let message = setup.value {
            throw BenchmarkFailure("the sends-alone benchmark could not start its HTTP client: \(message)")
        }
        return SenderResult(requests: requests, delivered: delivered.value, seconds: seconds, threads: threads, concurrency: concurrency,
                            clientCPUSeconds: clientCPUSeconds, firstFailure: failure.value)
    }
}

/// A benchmark that could not run.
public struct BenchmarkFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
