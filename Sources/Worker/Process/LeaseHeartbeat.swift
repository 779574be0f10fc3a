import Foundation

/// The leases this worker holds, and which of them to extend.
///
/// A job is claimed under a lease of `leaseSeconds`; a healthy worker extends the leases of the
/// jobs it has held for a third of that (a slow FCM, a long token renewal), so the maintenance
/// leader never takes back a job whose answer is still coming. Time is passed in: no clock here.
struct LeaseHeartbeat: Sendable, Equatable {
    let leaseSeconds: Double
    /// When each held job was claimed or its lease last extended (seconds since 1970).
    private(set) var leasedAt: [JobKey: Double] = [:]

    init(leaseSeconds: Double) { self.leaseSeconds = leaseSeconds }

    /// How often to look for leases to extend.
    var interval: Double { max(0.5, min(leaseSeconds / 4, 15)) }

    var count: Int { leasedAt.count }

    mutating func claimed(_ ids: [Int], now: Double) {
        for id in ids { leasedAt[JobKey(id)] = now }
    }

    /// The jobs whose outcome was recorded: no longer held.
    mutating func settled(_ ids: [Int]) {
        for id in ids { leasedAt[JobKey(id)] = nil }
    }

    /// Held jobs whose lease has run for a third of its length or more, in id order.
    func due(now: Double) -> [Int] {
        leasedAt.filter { now - $0.value >= leaseSeconds / 3 }.map(\.key.id).sorted()
    }

    mutating func extended(_ ids: [Int], now: Double) {
        for id in ids where leasedAt[JobKey(id)] != nil { leasedAt[JobKey(id)] = now }
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
    private var ends: [JobKey: Double] = [:]
    let margin: Double

    init(leaseSeconds: Double) { margin = max(0.25, min(5, leaseSeconds / 4)) }

    /// Claimed or extended by a statement sent at `sentAt`.
    func held(_ ids: [Int], sentAt: Double, leaseSeconds: Double, onlyKnown: Bool = false) {
        lock.lock()
        defer { lock.unlock() }
        for id in ids where !onlyKnown || ends[JobKey(id)] != nil { ends[JobKey(id)] = sentAt + leaseSeconds }
    }

    func settled(_ ids: [Int]) {
        lock.lock()
        defer { lock.unlock() }
        for id in ids { ends[JobKey(id)] = nil }
    }

    /// Whether job `id` may still be sent at `now`. A job this book does not know is not this
    /// worker's to send (every claim is written here before the sender sees it).
    func maySend(_ id: Int, now: Double) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let end = ends[JobKey(id)] else { return false }
        return end - now >= margin
    }
}

/// A job id (or a request tag) as a dictionary key. These are numbers the database or this
/// process hands out, not text from outside, so a multiply-and-fold hash serves: it spares the
/// standard SipHash (about 110 instructions) on each of the ten or so look-ups a message makes in
/// the worker's books (leases, metrics, requests in flight).
struct JobKey: Hashable, Sendable {
    let id: Int
    @inline(__always) init(_ id: Int) { self.id = id }
    static func == (a: JobKey, b: JobKey) -> Bool { a.id == b.id }
    func hash(into hasher: inout Hasher) { hasher.combine(id) }
    /// What Dictionary and Set hash with: the id mixed with the table's seed (the low bits pick the
    /// bucket, so the high bits are folded down).
    func _rawHashValue(seed: Int) -> Int {
        let mixed = (id ^ seed) &* -7_046_029_254_386_353_131
        return mixed ^ (mixed &>> 31)
    }
}
