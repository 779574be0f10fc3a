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
