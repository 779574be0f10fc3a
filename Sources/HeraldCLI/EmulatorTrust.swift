import Emulator
import Foundation
import Logging
import Postgres
import Queue

/// Test mode's other half (`ProviderEndpoints` is the first): the emulator in `herald work`'s
/// process accepts the keys the registry points at, so every entry's jobs reach its stand-in
/// instead of a real service. An FCM project's service account is trusted as the key it is (its
/// grants go to the emulator's token endpoint whatever its `token_uri` says); an APNs app's .p8
/// key as the key ID, team ID and topic the emulator wrote above it when it issued the key
/// (`APNsKeyIssue`), so a registry entry whose key ID, team ID or topic is wrong is refused as
/// Apple refuses it; a key of Apple's, which says none of these, as the entry's. The registry is
/// read again every `interval` seconds while the pool runs, so an entry added or corrected later
/// is trusted before a worker takes it up (within the registry poll of the workers).
final class EmulatorTrust: @unchecked Sendable {
    let emulator: EmulatorServer
    let databaseURL: String
    let log: Logger
    /// What was trusted, by entry: the reference and values it was trusted with.
    private var trusted: [String: String] = [:]
    private let stopped = NSCondition()
    private var stopping = false
    private var thread: Thread?

    init(emulator: EmulatorServer, databaseURL: String, log: Logger) {
        self.emulator = emulator
        self.databaseURL = databaseURL
        self.log = log
    }

    /// Trusts every entry's key now, then again every `interval` seconds on a thread of its own
    /// until `stop`.
    func start(_ connection: PGConnection, interval: Double = 1) {
        trustRegistry(connection)
        let thread = Thread { [self] in
            var connection: PGConnection? = nil
            while true {
                stopped.lock()
                if !stopping { _ = stopped.wait(until: Date().addingTimeInterval(interval)) }
                let done = stopping
                stopped.unlock()
                if done { return }
                do {
                    if connection == nil { connection = try PGConnection(url: databaseURL) }
                    trustRegistry(connection!)
                } catch {
                    connection = nil
                }
            }
        }
        thread.name = "emulator trust"
        self.thread = thread
        thread.start()
    }

    func stop() {
        stopped.lock()
        stopping = true
        stopped.signal()
        stopped.unlock()
    }

    /// One reading of the registry: each entry whose key reference or values changed is
    /// trusted (again). A key that cannot be read is left to the worker, which pauses its entry
    /// naming the file (`credentials: ...`): nothing is sent with it anywhere.
    func trustRegistry(_ connection: PGConnection) {
        let environment = ProcessInfo.processInfo.environment
        do {
            for project in try ProjectRegistry.list(connection) {
                let mark = "fcm \(project.credentials)"
                guard trusted[project.name] != mark, let json = Self.keyText(project.credentials, environment: environment) else { continue }
                do {
                    try emulator.trustServiceAccount(json: json)
                    trusted[project.name] = mark
                    log.info("test mode: the emulator in this process accepts project \(project.name)'s key (\(project.credentials)); its jobs go to the emulator, not to FCM")
                } catch {
                    trusted[project.name] = mark
                }
            }
            for app in try APNsApps.list(connection) {
                let mark = "apns \(app.keyFile) \(app.keyID) \(app.teamID) \(app.topic)"
                guard trusted[app.name] != mark, let pem = Self.keyText(app.keyFile, environment: environment) else { continue }
                trusted[app.name] = mark
                let issue = APNsKeyIssue(pem: pem)
                // Apple's own key says nothing of its team or app: the entry's are taken.
                let keyID = issue?.keyID ?? app.keyID, teamID = issue?.teamID ?? app.teamID, topic = issue?.topic ?? app.topic
                do {
                    try emulator.trustAPNsKey(pem: pem, keyID: keyID, teamID: teamID, topics: [topic])
                    log.info("test mode: the emulator in this process accepts APNs app \(app.name)'s key as key \(keyID) of team \(teamID) for topic \(topic)"
                             + (issue == nil ? " (the entry's values: the key does not say them)" : " (as the emulator issued it)")
                             + "; its jobs go to the emulator, not to Apple")
                } catch {
                    continue
                }
            }
        } catch {
            log.warning("test mode: cannot read the registry to trust its keys (\(error)); entries added meanwhile wait")
        }
    }

    /// The text a key reference names: a file's contents, or an environment variable's value.
    static func keyText(_ reference: String, environment: [String: String]) -> String? {
        if reference.hasPrefix("env:") { return environment[String(reference.dropFirst(4))].flatMap { $0.isEmpty ? nil : $0 } }
        return FileManager.default.contents(atPath: reference).flatMap { String(data: $0, encoding: .utf8) }
    }
}
