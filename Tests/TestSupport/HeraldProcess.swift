import Foundation

/// The built `herald` binary, run as a user would run it.
public final class HeraldProcess: @unchecked Sendable {
    public let process = Process()
    public let logPath: String

    /// The binary beside the test bundle (swift test builds every product), or under .build.
    public static func binary() throws -> String {
        var candidates: [String] = []
        let testBinary = URL(fileURLWithPath: ProcessInfo.processInfo.arguments[0]).resolvingSymlinksInPath()
        var directory = testBinary.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(directory.appendingPathComponent("herald").path)
            directory = directory.deletingLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(root.appendingPathComponent(".build/debug/herald").path)
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        throw TestFailure("the herald binary is not built (looked in \(candidates.joined(separator: ", "))); run swift build")
    }

    /// `wrapper`: a command that runs herald (e.g. strace and its options), given the binary and
    /// `arguments` after its own.
    public init(_ arguments: [String], environment: [String: String], under wrapper: [String] = []) throws {
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = Array(wrapper.dropFirst()) + [try Self.binary()] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: try Self.binary())
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        for key in ["DATABASE_URL", "GOOGLE_APPLICATION_CREDENTIALS", "HERALD_FCM_URL", "HERALD_CA_FILE", "HERALD_HOME", "HERALD_IID_URL",
                    "HERALD_APNS_URL"] { env[key] = nil }
        // Every pool a test starts serves its admin endpoint on a port of its own, not the default 9464.
        env["HERALD_ADMIN_ADDRESS"] = "127.0.0.1:0"
        for (key, value) in environment { env[key] = value }
        process.environment = env
        logPath = NSTemporaryDirectory() + "herald-test-\(UUID().uuidString).log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
    }

    /// The shared claim on the machine this process holds (see `MachineLock`), by its thread.
    private var machineClaim: ObjectIdentifier? = nil
    private let claimLock = NSLock()

    public func start() throws {
        machineClaim = MachineLock.share()
        do { try process.run() } catch {
            releaseMachine()
            throw error
        }
    }

    private func releaseMachine() {
        claimLock.lock()
        defer { claimLock.unlock() }
        if let machineClaim { MachineLock.release(machineClaim) }
        machineClaim = nil
    }
    public var pid: Int32 { process.processIdentifier }
    /// Still running (a look, unlike `wait`, which kills it on timeout).
    public var isRunning: Bool { process.isRunning }
    public var output: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits up to `timeout` seconds for the exit; returns the status, or nil (after killing it) on timeout.
    @discardableResult
    public func wait(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Self.awaitExit(process)
            releaseMachine()
            return nil
        }
        releaseMachine()
        return process.terminationStatus
    }

    /// Waits up to 30 s for a killed process to be seen gone. Foundation sees a child's end only
    /// when every holder of a descriptor it passed on has closed it; a test must not hang if a
    /// grandchild kept one (the test then fails on the nil status instead).
    static func awaitExit(_ process: Process) {
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    }

    public func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// Runs to completion and returns (status, output); kills it after `timeout` seconds.
    public static func run(_ arguments: [String], environment: [String: String], timeout: Double = 120) throws -> (status: Int32?, output: String) {
        let herald = try HeraldProcess(arguments, environment: environment)
        try herald.start()
        let status = herald.wait(timeout: timeout)
        return (status, herald.output)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Self.awaitExit(process)
        }
        releaseMachine()
        try? FileManager.default.removeItem(atPath: logPath)
    }
}
