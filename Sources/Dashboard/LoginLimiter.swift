import Synchronization

/// Failed logins (a wrong token at `POST /login`, or a wrong bearer token on the API) limited
/// per client address: after `limit` failures within `window` seconds, every login attempt from
/// that address, right or wrong, is answered 429 with Retry-After until the oldest failure has
/// left the window. Guessing the token then costs `window / limit` seconds a try; an operator who
/// mistyped waits at most `window`. The time is passed in, so tests need not wait a minute.
///
/// Behind a reverse proxy every client has the proxy's address (forwarded headers are not
/// trusted): they share one budget.
final class LoginLimiter: Sendable {
    let limit: Int
    let window: Double
    /// Addresses kept at most; beyond that the ones with the oldest failures are forgotten.
    let capacity: Int
    private struct State {
        var failures: [String: [Double]] = [:]
        var failed = 0
        var refused = 0
    }
    private let state = Mutex(State())

    init(limit: Int = 10, window: Double = 60, capacity: Int = 10_000) {
        self.limit = max(1, limit)
        self.window = max(1, window)
        self.capacity = max(1, capacity)
    }

    /// The address without its port (`127.0.0.1:5432` → `127.0.0.1`, `[::1]:80` → `::1`).
    static func client(_ remoteAddress: String) -> String {
        if remoteAddress.hasPrefix("["), let close = remoteAddress.firstIndex(of: "]") {
            return String(remoteAddress[remoteAddress.index(after: remoteAddress.startIndex)..<close])
        }
        if remoteAddress.filter({ $0 == ":" }).count == 1, let colon = remoteAddress.lastIndex(of: ":") {
            return String(remoteAddress[..<colon])
        }
        return remoteAddress
    }

    /// Seconds the client must wait before trying again, or nil when it may try now. A refusal is counted.
    func retryAfter(_ remoteAddress: String, now: Double) -> Double? {
        let client = Self.client(remoteAddress)
        return state.withLock { state in
            guard var times = state.failures[client] else { return nil }
            times.removeAll { now - $0 >= window }
            if times.isEmpty {
                state.failures[client] = nil
                return nil
            }
            state.failures[client] = times
            guard times.count >= limit else { return nil }
            state.refused += 1
            return max(1, (times[times.count - limit] + window - now).rounded(.up))
        }
    }

    /// A wrong token from this client.
    func failed(_ remoteAddress: String, now: Double) {
        let client = Self.client(remoteAddress)
        state.withLock { state in
            state.failed += 1
            var times = state.failures[client] ?? []
            times.removeAll { now - $0 >= window }
            times.append(now)
            state.failures[client] = times
            if state.failures.count > capacity {
                // Forget the clients whose last failure is oldest.
                let oldest = state.failures.sorted { ($0.value.last ?? 0) < ($1.value.last ?? 0) }.prefix(state.failures.count - capacity)
                for (key, _) in oldest { state.failures[key] = nil }
            }
        }
    }

    /// Wrong tokens seen, and attempts refused with 429, since the dashboard started.
    var counts: (failed: Int, refused: Int) { state.withLock { ($0.failed, $0.refused) } }
}
