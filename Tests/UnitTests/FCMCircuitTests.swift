import Testing
@testable import Worker

/// When the sender stops sending because FCM is down for everyone, and when it starts again;
/// driven with a clock of the test's own.
@Suite struct FCMCircuitTests {
    let t0 = 1_000_000.0
    let settings = FCMCircuit.Settings()

    /// A circuit that just opened at t0.
    func opened() -> FCMCircuit {
        var circuit = FCMCircuit(settings: settings)
        for i in 0..<(settings.failuresToOpen - 1) { #expect(circuit.failed(now: t0 - 0.1 + Double(i) * 0.01) == nil) }
        #expect(circuit.failed(now: t0) == .opened(holdUntil: t0 + settings.probeInterval + settings.holdMargin))
        return circuit
    }

    @Test func failuresInARowOpenIt() {
        let circuit = opened()
        #expect(circuit.isOpen)
        #expect(!circuit.probeDue(now: t0 + settings.probeInterval - 0.01))
        #expect(circuit.probeDue(now: t0 + settings.probeInterval))
    }

    @Test func anAnswerBetweenFailuresKeepsItClosed() {
        // One message's 500 among deliveries is that message's trouble, however many there are.
        var circuit = FCMCircuit(settings: settings)
        for i in 0..<100 {
            #expect(circuit.failed(now: t0 + Double(i)) == nil)
            if i % (settings.failuresToOpen - 1) == settings.failuresToOpen - 2 { #expect(circuit.answered() == nil) }
        }
        #expect(!circuit.isOpen)
    }

    @Test func failuresSpreadOutDoNotOpenIt() {
        // One failure a second, nothing else: fewer than failuresToOpen fit in one window.
        var circuit = FCMCircuit(settings: settings)
        for i in 0..<200 { #expect(circuit.failed(now: t0 + Double(i)) == nil) }
        #expect(!circuit.isOpen)
        // The same failures close together do open it.
        for i in 0..<settings.failuresToOpen { _ = circuit.failed(now: t0 + 300 + Double(i) * 0.1) }
        #expect(circuit.isOpen)
    }

    @Test func failedProbesWaitLongerUpToTheLimit() {
        var circuit = opened()
        var now = t0 + settings.probeInterval
        var waits: [Double] = []
        for _ in 0..<6 {
            #expect(circuit.probeDue(now: now))
            circuit.probeSent()
            #expect(!circuit.probeDue(now: now + 100), "one probe at a time")
            guard case .stillDown(let until)? = circuit.probeFailed(now: now) else {
                Issue.record("a failed probe keeps the circuit open")
                return
            }
            let wait = until - settings.holdMargin - now
            waits.append(wait)
            now += wait
        }
        #expect(waits == [1, 2, 4, 4, 4, 4])
        #expect(circuit.isOpen)
    }

    @Test func anyAnswerClosesIt() {
        var probed = opened()
        probed.probeSent()
        #expect(probed.answered() == .closed)
        #expect(!probed.isOpen)
        #expect(!probed.probeDue(now: t0 + 100))

        // A late answer to a request sent before the outage closes it too.
        var late = opened()
        #expect(late.answered() == .closed)
        #expect(late.state == .closed)
    }

    @Test func failuresOfRequestsAlreadyInFlightChangeNothingWhileOpen() {
        var circuit = opened()
        for i in 0..<20 { #expect(circuit.failed(now: t0 + Double(i) * 0.01) == nil) }
        #expect(circuit.state == .open(nextProbe: t0 + settings.probeInterval, interval: settings.probeInterval))
    }

    @Test func afterClosingItTakesAWholeStreakToOpenAgain() {
        var circuit = opened()
        _ = circuit.answered()
        for i in 0..<(settings.failuresToOpen - 1) { #expect(circuit.failed(now: t0 + 10 + Double(i) * 0.01) == nil) }
        #expect(circuit.failed(now: t0 + 11) != nil)
    }
}
