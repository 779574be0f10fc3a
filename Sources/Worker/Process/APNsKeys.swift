import APNs
import Crypto
import Foundation
import Queue
import Synchronization

/// One APNs app as a worker sends for it: its registry entry, its provider token (shared by
/// every app of the same key, `APNsProviderTokens`), the URL its requests go to. Made when the
/// app is first needed, replaced when its key file changes, dropped when it has been idle a while
/// (the ring). A class so the sender can tell a replaced one from the one its requests in flight
/// were sent with.
final class APNsAppKeys: @unchecked Sendable {
    let app: APNsApp
    let token: APNsProviderToken
    /// `{base}/3/device/`: Apple's production or sandbox endpoint as the app says, or every app's
    /// `herald work --apns-url`.
    let deviceURL: String
    /// The key file (nil: an `env:` variable's key).
    let keyPath: String?
    /// The file's bytes the key was read from, to notice a change.
    let keyBytes: Data?

    init(app: APNsApp, token: APNsProviderToken, baseURL: String, keyPath: String?, keyBytes: Data?) {
        self.app = app
        self.token = token
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        deviceURL = base + "/3/device/"
        self.keyPath = keyPath
        self.keyBytes = keyBytes
    }

    var name: String { app.name }

    /// Reads `app`'s .p8 key (a file, or `env:VAR`) and checks it: a P-256 key in PEM, and a file
    /// named as Apple names it (`AuthKey_<KEYID>.p8`) only for the app's own key ID. What goes
    /// wrong is said naming the file or variable, never a byte of the key.
    static func load(_ app: APNsApp, baseURL: String?, tokens: APNsProviderTokens,
                     environment: [String: String] = ProcessInfo.processInfo.environment) throws(APNsKeyError) -> APNsAppKeys {
        let source: String
        let pem: String
        var keyPath: String? = nil
        var bytes: Data? = nil
        if app.keyFile.hasPrefix("env:") {
            let variable = String(app.keyFile.dropFirst(4))
            source = "the variable \(variable) (key_file \(app.keyFile))"
            guard let text = environment[variable], !text.isEmpty else {
                throw APNsKeyError("\(source) is not set in the worker's environment; set it to the .p8 key's text, or point key_file at the file")
            }
            pem = text
        } else {
            keyPath = app.keyFile
            source = "the key file \(app.keyFile)"
            guard FileManager.default.fileExists(atPath: app.keyFile) else {
                throw APNsKeyError("\(source) does not exist; put the app's .p8 key there, or change key_file (herald apns remove, then add)")
            }
            guard let data = FileManager.default.contents(atPath: app.keyFile) else {
                throw APNsKeyError("\(source) cannot be read by the worker (check its owner and mode)")
            }
            bytes = data
            guard let text = String(data: data, encoding: .utf8) else {
                throw APNsKeyError("\(source) is not text: an APNs key is a .p8 file (PEM) as Apple hands it out")
            }
            pem = text
            let file = (app.keyFile as NSString).lastPathComponent
            if file.hasPrefix("AuthKey_") && file.hasSuffix(".p8") {
                let named = String(file.dropFirst("AuthKey_".count).dropLast(".p8".count))
                if !named.isEmpty && named != app.keyID {
                    throw APNsKeyError("\(source) is the key of key ID \(named) by its name, but the app's key_id is \(app.keyID); point key_file at AuthKey_\(app.keyID).p8, or register the app with --key-id \(named)")
                }
            }
        }
        let key: P256PrivateKey
        do {
            key = try P256PrivateKey(pem: pem)
        } catch {
            throw APNsKeyError("\(source) is not an APNs signing key (a P-256 key in PKCS#8 PEM, as Apple's .p8): \(error)")
        }
        let token: APNsProviderToken
        do {
            token = try tokens.source(teamID: app.teamID, keyID: app.keyID) { () throws(CryptoError) -> P256PrivateKey in key }
            // Signed once now: a key that cannot sign pauses the app before any job goes out.
            _ = try token.current()
        } catch {
            throw APNsKeyError("\(source): cannot sign a provider token with it: \(error)")
        }
        return APNsAppKeys(app: app, token: token, baseURL: baseURL ?? app.baseURL, keyPath: keyPath, keyBytes: bytes)
    }
}

/// Why an APNs app's key cannot be used (never holding a byte of the key).
struct APNsKeyError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The APNs apps a worker carries now, shared by its threads as `ProjectKeyRing` is for FCM
/// projects: the store thread puts an app's keys here before it claims the app's first jobs; the
/// sender reads them for each job it sends.
final class APNsKeyRing: Sendable {
    private let keys = Mutex<[String: APNsAppKeys]>([:])
    /// One provider token per signing key, for every app of the worker.
    let tokens = APNsProviderTokens(clock: { Date().timeIntervalSince1970 })

    func keys(for app: String) -> APNsAppKeys? { keys.withLock { $0[app] } }
    func put(_ entry: APNsAppKeys) { keys.withLock { $0[entry.name] = entry } }
    func remove(_ app: String) { keys.withLock { _ = $0.removeValue(forKey: app) } }
    func contains(_ app: String) -> Bool { keys.withLock { $0[app] != nil } }
}
