import FCM
import Foundation
import Lifecycle

/// Watches the key file a worker's access tokens come from (GOOGLE_APPLICATION_CREDENTIALS, or a
/// registry project's path). When its content changes to a usable key of the same FCM project
/// (a key rotation), `rotated` is called once: the worker then stops gracefully (what is in
/// flight finishes, the rest goes back) and its supervisor starts it again, reading the new key.
/// A change to something unusable, or to another project's key, is logged once and the key in
/// use is kept. A `Service`: `run()` looks every `interval` seconds until `beginShutdown()`.
final class KeyWatch: Service, @unchecked Sendable {
    let path: String
    let fcmProject: String
    let interval: Double
    let log: Logger
    let rotated: @Sendable () -> Void
    private let wake = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false

    init(path: String, fcmProject: String, interval: Double = 5, log: Logger, rotated: @escaping @Sendable () -> Void) {
        self.path = path
        self.fcmProject = fcmProject
        self.interval = interval
        self.log = log
        self.rotated = rotated
    }

    var name: String { "key-watch" }

    func beginShutdown() {
        lock.lock(); stopped = true; lock.unlock()
        wake.signal()
    }

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    func run() {
        let loaded = FileManager.default.contents(atPath: path)
        var refused: Data? = nil
        while !isStopped {
            _ = wake.wait(timeout: .now() + interval)  // the pace of the look at the file; a shutdown ends it
            if isStopped { return }
            guard let now = FileManager.default.contents(atPath: path), now != loaded, now != refused else { continue }
            let account: ServiceAccount
            do {
                account = try ServiceAccount.parse(json: [UInt8](now), path: path)
            } catch {
                log.warning("the key file changed but cannot be used (\(error)); keeping the key in use")
                refused = now
                continue
            }
            guard account.projectID == fcmProject else {
                log.warning("the key file \(path) changed to a key of FCM project \"\(account.projectID)\", not \"\(fcmProject)\"; keeping the key in use")
                refused = now
                continue
            }
            log.info("the key file \(path) changed (a new key of \(account.clientEmail)); this worker stops and starts again with it")
            rotated()
            return
        }
    }
}
