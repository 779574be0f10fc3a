import Foundation
import TestSupport

/// `.build/python-venv`, the one virtual environment of the tests' Python tooling (firebase-admin,
/// selenium). Made on first use; each test adds the packages it needs, so one test never wipes
/// another's. Needs python3 with venv and PyPI; when they are unusable the test fails, it does
/// not skip.
enum PythonEnvironment {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let directory = packageRoot.appendingPathComponent(".build/python-venv").path
    /// Tests run in parallel; two pip runs in one environment must not overlap.
    private static let lock = NSLock()

    /// The environment's python, able to import every module of `modules` (installing `packages` when one is missing).
    static func python(importing modules: [String], packages: [String]) throws -> String {
        lock.lock()
        defer { lock.unlock() }
        let python = directory + "/bin/python"
        let imports = "import " + modules.joined(separator: ", ")
        if (try? run(python, ["-c", imports]))?.status == 0 { return python }
        if (try? run(python, ["-c", "import sys"]))?.status != 0 {
            let (created, output) = try run("/usr/bin/env", ["python3", "-m", "venv", "--clear", directory])
            guard created == 0 else { throw TestFailure("python3 -m venv \(directory) failed (install python3-venv):\n\(output)") }
        }
        let (installed, output) = try run(python, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + packages)
        guard installed == 0 else { throw TestFailure("pip install \(packages.joined(separator: " ")) failed (PyPI reachable?):\n\(output)") }
        return python
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
