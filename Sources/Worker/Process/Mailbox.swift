import CEpoll
import Foundation

/// A queue between the store thread and the sender thread. `put` may be called from any thread;
/// `fileDescriptor` (an eventfd) becomes readable when items are waiting, so the receiving thread
/// can wait on it together with its sockets.
public final class Mailbox<Item: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Item] = []
    public let fileDescriptor: Int32

    public init() {
        fileDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }
    deinit { close(fileDescriptor) }

    public func put(_ new: [Item]) {
        guard !new.isEmpty else { return }
        lock.lock()
        items.append(contentsOf: new)
        lock.unlock()
        signal()
    }
    public func put(_ item: Item) { put([item]) }

    /// Wakes the receiver without an item (e.g. to notice a stop request).
    public func signal() {
        var one: UInt64 = 1
        _ = write(fileDescriptor, &one, 8)
    }

    public func take() -> [Item] {
        var counter: UInt64 = 0
        _ = read(fileDescriptor, &counter, 8)
        lock.lock()
        defer { lock.unlock() }
        // The taken array keeps the buffer: keeping its capacity here would only allocate a copy
        // of it, on every take, an empty one included.
        let taken = items
        items = []
        return taken
    }

    public var count: Int {
        lock.lock(); defer { lock.unlock() }
        return items.count
    }
}

/// A flag set once from any thread (stop requested).
public final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    public init() {}
    public func set() { lock.lock(); value = true; lock.unlock() }
    public var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
}
