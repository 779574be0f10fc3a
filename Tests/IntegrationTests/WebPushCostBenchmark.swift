import Benchmark
import Foundation
import Testing

/// Prints what the wire of one Web Push message costs the sender's CPU, part by part
/// (`WebPushCost`); docs/webpush.md quotes its figures. Run alone:
/// `swift test --skip-build --filter WebPushCostBenchmark`. It asserts only that every part was
/// measured: figures on a shared machine are read, not judged, by a test.
@Suite struct WebPushCostBenchmark {
    @Test func printsTheCPUOfEncryptionAndTheVAPIDHeaderPerMessage() throws {
        for payload in [200, 3993] {
            let figures = try WebPushCost.measure(payloadBytes: payload, iterations: 1000, rounds: 5)
            print("Web Push wire, CPU per operation on one thread, payload \(payload) bytes (median of 5 rounds of 1,000):\n" + figures.text)
            #expect(figures.rows.count == 9)
            #expect(figures.rows.allSatisfy { $0.microseconds > 0 }, "\(figures.text)")
            let perMessage = try #require(figures.microseconds("encryption + cached VAPID header (per message)"))
            let nothing = try #require(figures.microseconds("nothing (the request's header lines)"))
            print("per message beyond nothing: \(((perMessage - nothing) * 10).rounded() / 10) µs")
        }
    }
}
