import Emulator
import Foundation
import Testing
import TestSupport

/// The official firebase-admin Python SDK, a client nobody here wrote, against the emulator:
/// OAuth through the service account's token_uri, sends through FCM_URL, errors mapped to the
/// SDK's exception types, access-token renewal. Needs python3 with venv and PyPI; when they are
/// unusable the test fails, it does not skip.
@Suite struct EmulatorFirebaseAdminTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test(.timeLimit(.minutes(10))) func officialPythonSDKWorksAgainstTheEmulator() throws {
        let python = try Self.virtualEnvironmentPython()
        let lifetime = 2
        let emulator = try startEmulator { $0.tokenLifetimeSeconds = lifetime }
        defer { emulator.stop() }
        let directory = NSTemporaryDirectory() + "herald-firebase-admin-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let accountFile = directory + "/service-account.json"
        try emulator.writeServiceAccount(to: accountFile, projectID: "herald-python")
        let mode = try FileManager.default.attributesOfItem(atPath: accountFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let script = Self.packageRoot.appendingPathComponent("Tests/Python/firebase_admin_check.py").path
        let (status, output) = try Self.run(python, [script, accountFile, emulator.baseURL, String(lifetime)])
        #expect(status == 0, "firebase_admin_check.py failed:\n\(output)")
        #expect(output.contains("all firebase-admin checks passed"), "\(output)")
        #expect(emulator.tokensIssued >= 2)
    }

    /// `.build/python-venv/bin/python` with firebase-admin (see `PythonEnvironment`).
    static func virtualEnvironmentPython() throws -> String {
        try PythonEnvironment.python(importing: ["firebase_admin", "firebase_admin.messaging"], packages: ["firebase-admin"])
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
