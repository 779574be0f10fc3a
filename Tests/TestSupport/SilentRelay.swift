import Foundation

/// A TCP relay on 127.0.0.1 in front of a server, whose path can go silent the way a network
/// partition looks before any keepalive gives up: after `cut()` nothing is forwarded in either
/// direction and nothing is closed; what either side sends is read and dropped (so its writes
/// never block), and new connections are accepted and left without an answer. After `heal()`
/// new connections are forwarded again; the ones cut stay silent (their peers must give up on
/// them, as after a real partition).
public final class SilentRelay: @unchecked Sendable {
    public let port: Int
    let targetPort: Int
    private let listener: Int32
    private let lock = NSLock()
    private var silent = false
    private var stopped = false
    /// Connections accepted while healthy that are still forwarding.
    private var generation = 0

    public init(targetPort: Int) throws {
        self.targetPort = targetPort
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure("relay: socket failed") }
        var yes: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw TestFailure("relay: cannot listen on 127.0.0.1")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        var actual = sockaddr_in()
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        listener = descriptor
        port = Int(UInt16(bigEndian: actual.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "silent-relay-accept"
        thread.start()
    }

    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// The path goes silent: from now on nothing passes, nothing is closed.
    public func cut() { lock.lock(); silent = true; generation += 1; lock.unlock() }
    /// New connections pass again (the cut ones stay silent).
    public func heal() { lock.lock(); silent = false; lock.unlock() }
    public func stop() {
        lock.lock(); stopped = true; lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private var state: (silent: Bool, stopped: Bool, generation: Int) {
        lock.lock(); defer { lock.unlock() }
        return (silent, stopped, generation)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if state.stopped { return }
                continue
            }
            let thread = Thread { [self] in relay(client) }
            thread.name = "silent-relay"
            thread.start()
        }
    }

    private func relay(_ client: Int32) {
        defer { close(client) }
        let start = state
        var server: Int32 = -1
        if !start.silent {
            server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if connected != 0 { close(server); return }
        }
        defer { if server >= 0 { close(server) } }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let now = state
            if now.stopped { return }
            // A connection accepted while silent, or one that was open when the path was cut,
            // never forwards again.
            let forwarding = server >= 0 && now.generation == start.generation
            var descriptors = [pollfd(fd: client, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
            _ = poll(&descriptors, server >= 0 ? 2 : 1, 200)
            for (index, from) in [client, server].enumerated() where from >= 0 && descriptors[index].revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
                if count <= 0 {
                    // A side closed. While forwarding, close the other (as TCP would pass the FIN);
                    // while silent, the other side hears nothing.
                    if forwarding { return }
                    if from == client { return }
                    close(server)
                    server = -1
                    continue
                }
                guard forwarding else { continue }  // dropped: the path is silent
                let to = from == client ? server : client
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes { write(to, $0.baseAddress! + offset, count - offset) }
                    if written <= 0 { return }
                    offset += written
                }
            }
        }
    }
}
