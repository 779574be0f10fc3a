/// Where a delayed response goes when its time comes.
enum ResponseTarget {
    /// An HTTP/2 stream of a connection.
    case stream(Int32)
    /// The n-th request of an HTTP/1.1 connection (responses leave in request order).
    case sequence(UInt64)
}

/// A response waiting for its deadline.
struct DelayedResponse {
    var deadline: UInt64
    /// Insertion order, so equal deadlines leave first in, first out.
    var order: UInt64
    var connection: UInt64
    var target: ResponseTarget
    var response: HTTPServerResponse
}

/// A binary min-heap of delayed responses by deadline. With a fixed latency every new entry has
/// the latest deadline, so a push stops at once and the heap behaves like a queue.
struct TimerHeap {
    private(set) var items: [DelayedResponse] = []
    private var nextOrder: UInt64 = 0

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var earliest: UInt64? { items.first?.deadline }

    mutating func push(deadline: UInt64, connection: UInt64, target: ResponseTarget, response: HTTPServerResponse) {
        nextOrder &+= 1
        items.append(DelayedResponse(deadline: deadline, order: nextOrder, connection: connection, target: target, response: response))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard precedes(child, parent) else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popDue(now: UInt64) -> DelayedResponse? {
        guard let first = items.first, first.deadline <= now else { return nil }
        let last = items.removeLast()
        guard !items.isEmpty else { return last }
        items[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, precedes(left, smallest) { smallest = left }
            if right < items.count, precedes(right, smallest) { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }

    mutating func removeAll() { items.removeAll() }

    private func precedes(_ a: Int, _ b: Int) -> Bool {
        let da = items[a].deadline, db = items[b].deadline
        return da < db || (da == db && items[a].order < items[b].order)
    }
}
