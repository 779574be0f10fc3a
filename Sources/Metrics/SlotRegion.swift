import Foundation
import Queue
import Synchronization

extension MessageOutcome {
    /// Its position among `allCases`: the order of the slot region's counters.
    public var index: Int {
        switch self {
        case .completed: 0
        case .retried: 1
        case .dead: 2
        case .discarded: 3
        case .pruned: 4
        case .released: 5
        case .snoozed: 6
        }
    }
}

/// The counters of one worker slot of a pool, in a shared-memory region the supervisor
/// creates and every worker process it starts for that slot maps.
///
/// Why shared memory rather than a pipe of increments: a worker adds to plain atomics in the
/// region (no system call, no buffer that can fill and block the worker, no message framing),
/// and whatever it added before dying is still there: the supervisor owns the mapping, so a
/// worker killed with SIGKILL loses nothing it had counted, and the next worker of the slot
/// keeps adding to the same totals. The supervisor reads the region only when scraped.
///
/// Layout: 64-bit words, each used as an `Atomic<UInt64>`. A few header words, the FCM request
/// duration histogram, then two label tables (FCM codes; queues with their outcome counters and
/// delivery-latency histogram), then the table of projects a worker carrying many keeps apart
/// (see `projectCapacity`). A label's name is written before the table's count is raised
/// (a releasing store), so a reader that loads the count (acquiring) sees whole names. Label
/// names are registered only by the process that writes the slot.
public final class SlotRegion: @unchecked Sendable {
    public static let durationBounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    public static let latencyBounds: [Double] = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600]
    /// Distinct queues and FCM codes a slot keeps apart; the last entry of each table collects
    /// any beyond that under the label `(other)`.
    public static let queueCapacity = 128
    /// FCM's codes and APNs's reasons (the latter under `apnsCodePrefix`) share the table.
    public static let codeCapacity = 48
    /// Marks an APNs answer's code in the codes table: shown as `herald_apns_requests_total`,
    /// never among FCM's answers.
    public static let apnsCodePrefix = "apns:"
    /// Marks a queue entry of another provider than FCM: `apns` and this, then the queue's name
    /// (a unit separator, which no queue name holds). An FCM job's entry is its queue's name
    /// alone, as the table always held it.
    public static let providerSeparator = "\u{1F}"

    /// The queue table's entry for jobs of `queue` sent by `provider` (`fcm`, `apns`).
    public static func queueEntry(_ queue: String, provider: String) -> String {
        provider == "fcm" ? queue : provider + providerSeparator + queue
    }

    /// The provider and queue of a queue table's entry (`queueEntry`'s inverse).
    public static func providerQueue(_ entry: String) -> (provider: String, queue: String) {
        guard let separator = entry.firstIndex(of: Character(providerSeparator)) else { return ("fcm", entry) }
        return (String(entry[..<separator]), String(entry[entry.index(after: separator)...]))
    }
    /// Label values up to this many UTF-8 bytes are kept whole; longer ones are shortened to a
    /// prefix and a hash (still distinct, still stable across restarts).
    public static let nameBytes = 120
    public static let overflowLabel = "(other)"
    /// Projects a worker carrying many keeps apart in its slot, each a row of its answers by
    /// code, quota answers, snoozes, rate and pause; the last row collects the projects beyond
    /// that under `project="(other)"`, so a sum over `project` is still the pool's total. 256
    /// rows of 56 words are 112 KiB, beside the 44 KiB of the rest of a slot.
    public static let projectCapacity = 256

    static let magic: UInt64 = 0x3444_4c41_5245_4831  // "1HERALD4", with the layout's version
    enum Header: Int {
        case magic = 0, pid, databaseConnected, tokenHeld, inFlight, projectPausedUntilMilliseconds, tokenRefreshes,
             staleOutcomes, queueCount, codeCount, logWritesDropped, quotaDevice, quotaTopic, quotaProject, snoozed,
             projectRateMilli, window
    }
    /// The quota limits counted apart (herald_fcm_quota_exceeded_total), with their header words.
    public static let quotaLimits: [(label: String, word: Int)] = [
        ("device", Header.quotaDevice.rawValue), ("topic", Header.quotaTopic.rawValue), ("project", Header.quotaProject.rawValue),
    ]
    static let headerWords = 24
    static let nameWords = 1 + nameBytes / 8
    static let durationStart = headerWords
    static let durationWords = durationBounds.count + 2           // buckets, +Inf, sum in µs
    /// APNs requests' durations, a histogram of their own.
    static let apnsDurationStart = durationStart + durationWords
    static let codesStart = apnsDurationStart + durationWords
    static let codeWords = nameWords + 1
    static let queuesStart = codesStart + codeCapacity * codeWords
    static let outcomeCount = MessageOutcome.allCases.count
    static let queueWords = nameWords + outcomeCount + latencyBounds.count + 2
    static let projectsStart = queuesStart + queueCapacity * queueWords
    /// A project row: a version (odd while the writer renames the row, so a reader retries), its
    /// state (`ProjectRow`), its name, its answers by the index of their code in the codes table,
    /// its quota answers by limit, snoozes, its rate (thousandths) and pause (milliseconds).
    enum ProjectWord {
        static let version = 0, state = 1, name = 2
        static let codes = name + SlotRegion.nameWords
        static let quota = codes + SlotRegion.codeCapacity
        static let snoozed = quota + SlotRegion.quotaLimits.count
        static let rateMilli = snoozed + 1
        static let pausedUntilMilliseconds = rateMilli + 1
        static let count = pausedUntilMilliseconds + 1
    }
    /// A project row's state word.
    enum ProjectRow: UInt64 {
        case empty = 0
        /// The worker carries the project.
        case live = 1
        /// The worker dropped the project: its counts stay shown until the row is needed for
        /// another project (then they move to the overflow row).
        case dropped = 2
    }
    public static let totalWords = projectsStart + projectCapacity * ProjectWord.count
    public static let byteCount = totalWords * 8

    public let fileDescriptor: Int32
    private let words: UnsafeMutablePointer<Atomic<UInt64>>
    private let owned: Bool

    /// A new zeroed region in an unlinked file (under /dev/shm when there is one), so nothing is
    /// left behind whatever way the pool ends. Its descriptor is close-on-exec; the supervisor
    /// hands it to each worker explicitly.
    public static func create() throws(SlotRegionError) -> SlotRegion {
        let directory = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        var template = Array((directory + "/herald-metrics-XXXXXX").utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard created >= 0 else { throw SlotRegionError("cannot create a metrics region in \(directory): \(String(cString: strerror(errno)))") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        // Close-on-exec, and clear of the low numbers a worker is handed its descriptors on (see Supervisor).
        let descriptor = fcntl(created, F_DUPFD_CLOEXEC, 10)
        close(created)
        guard descriptor >= 0 else { throw SlotRegionError("cannot move the metrics region's descriptor: \(String(cString: strerror(errno)))") }
        guard ftruncate(descriptor, off_t(byteCount)) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw SlotRegionError("cannot size the metrics region in \(directory) to \(byteCount) bytes: \(reason)")
        }
        let region: SlotRegion
        do { region = try SlotRegion(mapping: descriptor, owned: true) } catch {
            close(descriptor)
            throw error
        }
        region.words[Header.magic.rawValue].store(Self.magic, ordering: .releasing)
        return region
    }

    /// Maps a region created by `create()` (in a worker: the descriptor its supervisor passed on).
    public static func attach(fileDescriptor: Int32) throws(SlotRegionError) -> SlotRegion {
        var status = stat()
        guard fstat(fileDescriptor, &status) == 0, Int(status.st_size) == byteCount else {
            throw SlotRegionError("file descriptor \(fileDescriptor) is not a metrics region of \(byteCount) bytes")
        }
        let region = try SlotRegion(mapping: fileDescriptor, owned: false)
        guard region.words[Header.magic.rawValue].load(ordering: .acquiring) == magic else {
            throw SlotRegionError("file descriptor \(fileDescriptor) holds no metrics region of this herald version")
        }
        return region
    }

    private init(mapping descriptor: Int32, owned: Bool) throws(SlotRegionError) {
        guard let base = mmap(nil, Self.byteCount, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0), base != MAP_FAILED else {
            throw SlotRegionError("cannot map the metrics region: \(String(cString: strerror(errno)))")
        }
        fileDescriptor = descriptor
        words = base.bindMemory(to: Atomic<UInt64>.self, capacity: Self.totalWords)
        self.owned = owned
    }

    deinit {
        munmap(UnsafeMutableRawPointer(words), Self.byteCount)
        if owned { close(fileDescriptor) }
    }

    // MARK: words

    @inline(__always) func add(_ word: Int, _ amount: UInt64) { words[word].wrappingAdd(amount, ordering: .relaxed) }
    @inline(__always) func store(_ word: Int, _ value: UInt64) { words[word].store(value, ordering: .relaxed) }
    @inline(__always) func load(_ word: Int) -> UInt64 { words[word].load(ordering: .relaxed) }

    /// Zeroes what describes a running process (pid, readiness, in flight, pause): the
    /// supervisor calls it when the slot's worker has exited, so a dead worker never looks ready.
    public func resetProcessState() {
        for field in [Header.pid, .databaseConnected, .tokenHeld, .inFlight, .projectPausedUntilMilliseconds] {
            store(field.rawValue, 0)
        }
    }

    // MARK: label tables

    enum Table {
        case codes, queues
        var countWord: Int { self == .codes ? Header.codeCount.rawValue : Header.queueCount.rawValue }
        var start: Int { self == .codes ? SlotRegion.codesStart : SlotRegion.queuesStart }
        var stride: Int { self == .codes ? SlotRegion.codeWords : SlotRegion.queueWords }
        var capacity: Int { self == .codes ? SlotRegion.codeCapacity : SlotRegion.queueCapacity }
    }

    func entryStart(_ table: Table, _ index: Int) -> Int { table.start + index * table.stride }

    /// The names of a table's entries, in index order.
    func names(_ table: Table) -> [String] {
        let count = min(Int(words[table.countWord].load(ordering: .acquiring)), table.capacity)
        return (0..<count).map { readName(at: entryStart(table, $0)) }
    }

    /// Writes `name` into entry `index` and publishes it (the caller holds the writer's lock).
    func publish(_ table: Table, index: Int, name: String) {
        writeName(name, at: entryStart(table, index))
        words[table.countWord].store(UInt64(index + 1), ordering: .releasing)
    }

    func projectRowStart(_ row: Int) -> Int { Self.projectsStart + row * ProjectWord.count }

    /// Names (and so publishes) project row `row` (the caller holds the writer's lock). A row
    /// that held another project is first emptied into the overflow row, with its version odd
    /// meanwhile so a reader that sees the renaming reads the row again.
    func publishProject(row: Int, name: String, overflow overflowRow: Int) {
        let start = projectRowStart(row)
        let version = words[start + ProjectWord.version].load(ordering: .relaxed)
        words[start + ProjectWord.version].store(version + 1, ordering: .releasing)
        if load(start + ProjectWord.state) != ProjectRow.empty.rawValue, row != overflowRow {
            let overflow = projectRowStart(overflowRow)
            for word in ProjectWord.codes..<ProjectWord.rateMilli {
                let count = load(start + word)
                if count > 0 { add(overflow + word, count) }
                store(start + word, 0)
            }
        }
        for word in ProjectWord.rateMilli..<ProjectWord.count { store(start + word, 0) }
        writeName(name, at: start + ProjectWord.name)
        store(start + ProjectWord.state, ProjectRow.live.rawValue)
        words[start + ProjectWord.version].store(version + 2, ordering: .releasing)
    }

    func projectState(row: Int) -> ProjectRow { ProjectRow(rawValue: load(projectRowStart(row) + ProjectWord.state)) ?? .empty }
    func setProjectState(row: Int, _ state: ProjectRow) { store(projectRowStart(row) + ProjectWord.state, state.rawValue) }

    /// Project row `row` as one consistent reading: nil when empty, or when its writer kept
    /// renaming it (it is then read at the next scrape).
    func readProject(row: Int) -> (name: String, state: ProjectRow, words: [UInt64])? {
        let start = projectRowStart(row)
        for _ in 0..<4 {
            let before = words[start + ProjectWord.version].load(ordering: .acquiring)
            if before % 2 == 1 { continue }
            let state = ProjectRow(rawValue: load(start + ProjectWord.state)) ?? .empty
            if state == .empty { return nil }
            let name = readName(at: start + ProjectWord.name)
            let counts = (ProjectWord.codes..<ProjectWord.count).map { load(start + $0) }
            if words[start + ProjectWord.version].load(ordering: .acquiring) == before { return (name, state, counts) }
        }
        return nil
    }

    private func writeName(_ name: String, at start: Int) {
        let bytes = Array(Self.shortened(name).utf8)
        store(start, UInt64(bytes.count))
        for word in 0..<(Self.nameWords - 1) {
            var packed: UInt64 = 0
            for byte in 0..<8 where word * 8 + byte < bytes.count {
                packed |= UInt64(bytes[word * 8 + byte]) << (8 * UInt64(byte))
            }
            store(start + 1 + word, packed)
        }
    }

    private func readName(at start: Int) -> String {
        let length = min(Int(load(start)), Self.nameBytes)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        for index in 0..<length {
            bytes.append(UInt8(truncatingIfNeeded: load(start + 1 + index / 8) >> (8 * UInt64(index % 8))))
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A label value that fits an entry: itself when short enough, else a prefix (cut on a
    /// character boundary) and a 64-bit FNV-1a hash of the whole, so two long names stay apart.
    public static func shortened(_ name: String) -> String {
        guard name.utf8.count > nameBytes else { return name }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        var prefix = ""
        for character in name.unicodeScalars {
            if prefix.utf8.count + String(character).utf8.count > nameBytes - 18 { break }
            prefix.unicodeScalars.append(character)
        }
        let hex = String(hash, radix: 16)
        return prefix + "~" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

public struct SlotRegionError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
