import CEpoll
import Glibc
import Synchronization

/// One thread's epoll loop: its connections, its listener (if it accepts), a wake-up eventfd
/// (connections handed over by the acceptor, stop requests) and a timerfd for delayed responses.
/// Everything but `handoff` and `stopRequested` is touched by the loop's own thread only.
final class EventLoop: @unchecked Sendable {
    let index: Int
    // The loop keeps what it needs rather than the server itself, so a server dropped without
    // stop() can deinit (and stop the loops) while they still run.
    let handler: HTTPServer.Handler
    let counters: ServerCounters
    let configuration: HTTPServer.Configuration
    let listener: Int32?
    let tls: TLSContext?
    let epollFD: Int32
    let wakeFD: Int32
    let timerFD: Int32
    /// Every loop of the server, for dealing accepted connections out.
    var peers: [EventLoop] = []
    private let handoff = Mutex<[Int32]>([])
    private let stopRequested = Atomic<Bool>(false)

    private var connections: [UInt64: Connection] = [:]
    private var nextSerial: UInt64 = firstConnectionTag
    private var timers = TimerHeap()
    private var armedDeadline: UInt64 = 0
    private var nextPeer = 0
    private var lastSweep: UInt64 = 0
    /// Scratch space every read on this loop lands in before a protocol engine consumes it.
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Scratch space for building HTTP/2 header blocks.
    var headerScratch: [UInt8] = []

    static let listenerTag: UInt64 = 1
    static let wakeTag: UInt64 = 2
    static let timerTag: UInt64 = 3
    static let firstConnectionTag: UInt64 = 16
    static let readBufferSize = 256 * 1024

    init(index: Int, handler: @escaping HTTPServer.Handler, counters: ServerCounters, configuration: HTTPServer.Configuration,
         listener: Int32?, tls: TLSContext?) throws(HTTPServerError) {
        self.index = index
        self.handler = handler
        self.counters = counters
        self.configuration = configuration
        self.listener = listener
        self.tls = tls
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        timerFD = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK | TFD_CLOEXEC))
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: EventLoop.readBufferSize, alignment: 16)
        guard epollFD >= 0, wakeFD >= 0, timerFD >= 0 else {
            let text = errnoText()
            closeEverything()
            throw HTTPServerError("cannot create the event loop's descriptors: \(text)")
        }
        add(wakeFD, tag: EventLoop.wakeTag, events: EPOLLIN.rawValue)
        add(timerFD, tag: EventLoop.timerTag, events: EPOLLIN.rawValue)
        if let listener { add(listener, tag: EventLoop.listenerTag, events: EPOLLIN.rawValue) }
    }

    deinit { readBuffer.deallocate() }

    private var closed = false

    /// Closes every descriptor this loop owns; used on stop and when start-up fails half-way.
    func closeEverything() {
        guard !closed else { return }
        closed = true
        peers = []  // the loops refer to each other; let them go
        for connection in Array(connections.values) { connection.close() }
        connections.removeAll()
        timers.removeAll()
        for fd in handoff.withLock({ pending -> [Int32] in defer { pending.removeAll() }; return pending }) { Glibc.close(fd) }
        if let listener { Glibc.close(listener) }
        if epollFD >= 0 { Glibc.close(epollFD) }
        if wakeFD >= 0 { Glibc.close(wakeFD) }
        if timerFD >= 0 { Glibc.close(timerFD) }
    }

    func requestStop() {
        stopRequested.store(true, ordering: .releasing)
        wake()
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    // MARK: epoll registration

    func add(_ fd: Int32, tag: UInt64, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = tag
        epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
    }

    func modify(_ fd: Int32, tag: UInt64, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = tag
        epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    // MARK: the loop

    func run() {
        let capacity = 512
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        while !stopRequested.load(ordering: .acquiring) {
            let count = epoll_wait(epollFD, events, Int32(capacity), 1000)
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            for i in 0..<Int(count) {
                let event = events[i]
                switch event.data.u64 {
                case EventLoop.listenerTag: acceptConnections()
                case EventLoop.wakeTag: drainWake()
                case EventLoop.timerTag: fireTimers()
                case let tag:
                    guard let connection = connections[tag] else { continue }
                    connection.handle(events: event.events)
                }
            }
            sweepIdleConnections()
        }
        closeEverything()
    }

    private func acceptConnections() {
        guard let listener else { return }
        while true {
            // accept4 needs _GNU_SOURCE, which Swift's Glibc does not expose; once per connection,
            // two fcntl calls cost nothing.
            let fd = accept(listener, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                // EAGAIN: no more waiting; EMFILE and the like: try again on the next wake-up.
                return
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            if configuration.acceptMode == .reusePort || peers.count <= 1 {
                adopt(fd)
                continue
            }
            let peer = peers[nextPeer % peers.count]
            nextPeer &+= 1
            if peer === self {
                adopt(fd)
            } else {
                peer.handoff.withLock { $0.append(fd) }
                peer.wake()
            }
        }
    }

    private func drainWake() {
        var value: UInt64 = 0
        _ = Glibc.read(wakeFD, &value, 8)
        let pending = handoff.withLock { pending -> [Int32] in
            defer { pending.removeAll(keepingCapacity: true) }
            return pending
        }
        for fd in pending { adopt(fd) }
    }

    private func adopt(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let serial = nextSerial
        nextSerial &+= 1
        var session: TLSSession? = nil
        if let tls {
            guard let created = TLSSession(context: tls, fd: fd) else {
                Glibc.close(fd)
                return
            }
            session = created
        }
        let connection = Connection(fd: fd, serial: serial, loop: self, tls: session)
        connections[serial] = connection
        add(fd, tag: serial, events: EPOLLIN.rawValue)
        counters.connectionsAccepted.wrappingAdd(1, ordering: .relaxed)
        counters.openConnections.wrappingAdd(1, ordering: .relaxed)
    }

    /// Called by a connection once it has closed its descriptor.
    func forget(_ connection: Connection) {
        connections.removeValue(forKey: connection.serial)
        counters.openConnections.wrappingSubtract(1, ordering: .relaxed)
    }

    private func sweepIdleConnections() {
        let idle = configuration.idleTimeoutSeconds
        let requestTimeout = configuration.requestTimeoutSeconds
        guard idle > 0 || requestTimeout > 0 else { return }
        let now = monotonicNanoseconds()
        guard now &- lastSweep > 1_000_000_000 else { return }
        lastSweep = now
        let limit = UInt64(idle) * 1_000_000_000
        let requestLimit = UInt64(requestTimeout) * 1_000_000_000
        for connection in Array(connections.values) {
            if idle > 0 && now &- connection.lastActivity > limit && !connection.hasPendingWork {
                connection.close()
                continue
            }
            // A request whose body trickles in, or never comes, does not hold a connection past this.
            let since = connection.incompleteRequestSince
            if requestTimeout > 0 && since != 0 && now &- since > requestLimit {
                connection.timeOutRequest()
            }
        }
    }

    // MARK: delayed responses

    func schedule(_ response: HTTPServerResponse, for connection: UInt64, target: ResponseTarget) {
        let deadline = monotonicNanoseconds() &+ UInt64(max(0, response.delayMilliseconds)) &* 1_000_000
        timers.push(deadline: deadline, connection: connection, target: target, response: response)
        armTimer()
    }

    private func armTimer() {
        guard let earliest = timers.earliest else { return }
        if armedDeadline != 0 && armedDeadline <= earliest { return }
        armedDeadline = earliest
        var spec = itimerspec()
        spec.it_value.tv_sec = Int(earliest / 1_000_000_000)
        spec.it_value.tv_nsec = Int(earliest % 1_000_000_000)
        timerfd_settime(timerFD, Int32(TFD_TIMER_ABSTIME), &spec, nil)
    }

    private func fireTimers() {
        var expirations: UInt64 = 0
        _ = Glibc.read(timerFD, &expirations, 8)
        armedDeadline = 0
        let now = monotonicNanoseconds()
        var touched: [Connection] = []
        while let due = timers.popDue(now: now) {
            guard let connection = connections[due.connection] else { continue }
            connection.deliverDelayed(due.response, to: due.target)
            if !connection.flushScheduled {
                connection.flushScheduled = true
                touched.append(connection)
            }
        }
        for connection in touched {
            connection.flushScheduled = false
            connection.afterDelayedDelivery()
        }
        armTimer()
    }
}
