import Foundation

/// The leases this worker holds, and which of them to extend.
///
/// A job is claimed under a lease of `leaseSeconds`; a healthy worker extends the leases of the
/// jobs it has held for a third of that (a slow FCM, a long token renewal), so the maintenance
/// leader never takes back a job whose answer is still coming. Time is passed in: no clock here.
struct LeaseHeartbeat: Sendable, Equatable {
    let leaseSeconds: Double
    /// When each held job was claimed or its lease last extended (seconds since 1970).
    private(set) var leasedAt: [Int: Double] = [:]

    init(leaseSeconds: Double) { self.leaseSeconds = leaseSeconds }

    /// How often to look for leases to extend.
    var interval: Double { max(0.5, min(leaseSeconds / 4, 15)) }

    var count: Int { leasedAt.count }

    mutating func claimed(_ ids: [Int], now: Double) {
        for id in ids { leasedAt[id] = now }
    }

    /// The jobs whose outcome was recorded: no longer held.
    mutating func settled(_ ids: [Int]) {
        for id in ids { leasedAt[id] = nil }
    }

    /// Held jobs whose lease has run for a third of its length or more, in id order.
    func due(now: Double) -> [Int] {
        leasedAt.filter { now - $0.value >= leaseSeconds / 3 }.map(\.key).sorted()
    }

    mutating func extended(_ ids: [Int], now: Double) {
        for id in ids where leasedAt[id] != nil { leasedAt[id] = now }
    }
}

/// When the lease of each job this worker holds ends, as far as it can prove: the store thread
/// writes it (a claim or an extension sent at `t` holds the job until `t + lease` at least, the
/// database's clock having read `t` or later), the sender thread reads it before it puts a job on
/// the wire. A worker that cannot extend its leases (PostgreSQL unreachable) so stops sending the
/// jobs it holds before they expire and another worker may take them: a job goes out only while
/// at least `margin` of its lease is left.
final class LeaseBook: @unchecked Sendable {
    private let lock = NSLock()
    private var ends: [Int: Double] = [:]
    let margin: Double

    init(leaseSeconds: Double) { margin = max(0.25, min(5, leaseSeconds / 4)) }

    /// Claimed or extended by a statement sent at `sentAt`.
    func held(_ ids: [Int], sentAt: Double, leaseSeconds: Double, onlyKnown: Bool = false) {
        lock.lock()
        defer { lock.unlock() }
        for id in ids where !onlyKnown || ends[id] != nil { ends[id] = sentAt + leaseSeconds }
    }

    func settled(_ ids: [Int]) {
        lock.lock()
        defer { lock.unlock() }
        for id in ids { ends[id] = nil }
    }

    /// Whether job `id` may still be sent at `now`. A job this book does not know is not this
    /// worker's to send (every claim is written here before the sender sees it).
    func maySend(_ id: Int, now: Double) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let end = ends[id] else { return false }
        return end - now >= margin
    }
}
