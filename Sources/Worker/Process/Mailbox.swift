import CEpoll
import Foundation

/// A queue between the store thread and the sender thread. `put` may be called from any thread;
/// `fileDescriptor` (an eventfd) becomes readable when items are waiting, so the receiving thread
/// can wait on it together with its sockets. The eventfd is written only when it is not readable
/// already and read only when it is, both under the lock: a worker takes from its mailboxes on
/// every turn of its loop, and most turns find nothing new, which then costs no system call.
public final class Mailbox<Item: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Item] = []
    /// Whether the eventfd holds a count (is readable): set by the write, cleared by the read.
    private var signalled = false
    public let fileDescriptor: Int32

    public init() {
        fileDescriptor = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }
    deinit { close(fileDescriptor) }

    public func put(_ new: [Item]) {
        guard !new.isEmpty else { return }
        lock.lock()
        items.append(contentsOf: new)
        raise()
        lock.unlock()
    }
    public func put(_ item: Item) { put([item]) }

    /// Wakes the receiver without an item (e.g. to notice a stop request).
    public func signal() {
        lock.lock()
        raise()
        lock.unlock()
    }

    /// Makes the eventfd readable unless it is; under the lock.
    private func raise() {
        guard !signalled else { return }
        var one: UInt64 = 1
        _ = write(fileDescriptor, &one, 8)
        signalled = true
    }

    public func take() -> [Item] {
        lock.lock()
        defer { lock.unlock() }
        if signalled {
            var counter: UInt64 = 0
            _ = read(fileDescriptor, &counter, 8)
            signalled = false
        }
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
