import Crypto
import Emulator
import Foundation
import JSON
import Testing
import TestSupport
import WebPush

/// Web Push's wire against implementations nobody here wrote (`Tests/Python/webpush_check.py`):
/// http_ece decrypts bodies the WebPush module encrypted, py_vapid verifies its VAPID headers,
/// and pywebpush encrypts and pushes bodies the emulator must decrypt. Needs python3 with venv
/// and PyPI; when they are unusable the test fails, it does not skip.
@Suite struct WebPushPythonTests {
    @Test(.timeLimit(.minutes(10))) func independentImplementationsReadHeraldsBodiesAndHeraldsEmulatorReadsTheirs() throws {
        let python = try PythonEnvironment.python(importing: ["http_ece", "py_vapid", "pywebpush"],
                                                  packages: ["http-ece", "py-vapid", "pywebpush"])
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator { $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key) }
        defer { emulator.stop() }

        // Bodies and headers made by Swift, for browsers whose keys Python is handed.
        let key = try VAPIDKey.generate()
        let subject = "mailto:ops@example.com"
        var cache = try VAPIDTokenCache(key: key, subject: subject)
        let now = Int64(Date().timeIntervalSince1970)
        var swiftMade: [JSONValue] = []
        for (index, plaintext) in ["", "Hello", #"{"title":"Ünïcode ✓","order":42}"#,
                                   String(repeating: "z", count: WebPushEncryption.maxPlaintextLength)].enumerated() {
            let browser = try P256PrivateKey.generate()
            let auth = Random.bytes(16)
            let keys = try WebPushSubscriptionKeys(p256dh: Base64URL.encode(browser.uncompressedPublicPoint), auth: Base64URL.encode(auth))
            let audience = ["https://fcm.googleapis.com", "https://updates.push.services.mozilla.com", "https://web.push.apple.com",
                            "https://push.example.net:8443"][index]
            swiftMade.append([
                "plaintext": .string(plaintext),
                "body": .string(Base64URL.encode(try WebPushEncryption.encrypt(Array(plaintext.utf8), for: keys))),
                "private_key": .string(Base64URL.encode(browser.rawScalar)),
                "auth": .string(Base64URL.encode(auth)),
                "authorization": .string(try cache.authorization(origin: audience, now: now)),
                "audience": .string(audience),
                "subject": .string(subject),
            ])
        }

        // Subscriptions the emulator issued, for pywebpush to push to: a standard one, and one
        // of Apple's bound to the key.
        let standard = try emulator.webPushSubscribe()
        let apple = try emulator.webPushSubscribe(WebPushSubscriptionOptions(mode: .apple, applicationServerKey: key.publicKeyBase64URL))
        let pushes: [(WebPushSubscription, String)] = [
            (standard, "from pywebpush"), (standard, #"{"title":"Ünïcode ✓"}"#), (apple, String(repeating: "a", count: 3000)),
        ]
        let directory = files.directory
        let pemPath = directory + "/vapid.pem"
        try key.pem.write(toFile: pemPath, atomically: true, encoding: .utf8)
        let cases: JSONValue = [
            "swift_made": .array(swiftMade),
            "emulator": [
                "ca_file": .string(files.certificate), "vapid_pem": .string(pemPath), "subject": .string(subject),
                "pushes": .array(pushes.map { ["subscription": $0.0.json, "payload": .string($0.1)] }),
            ],
        ]
        let casesPath = directory + "/cases.json"
        try cases.serialized.write(toFile: casesPath, atomically: true, encoding: .utf8)

        let script = PythonEnvironment.packageRoot.appendingPathComponent("Tests/Python/webpush_check.py").path
        let (status, output) = try PythonEnvironment.run(python, [script, casesPath])
        #expect(status == 0, "webpush_check.py failed:\n\(output)")
        #expect(output.contains("all webpush checks passed"), "\(output)")
        // 4 bodies × 6 checks, 3 pushes.
        #expect(output.split(separator: "\n").filter { $0.hasPrefix("ok: ") }.count == 27, "\(output)")

        // What pywebpush encrypted, the emulator decrypted, under the key pywebpush signed with.
        let delivered = emulator.webPushDeliveries()
        #expect(delivered.map(\.payloadText) == pushes.map { $0.1 })
        #expect(delivered.allSatisfy { $0.decryptionError == nil && $0.vapid.publicKey == key.publicKeyBase64URL })
        #expect(delivered.map(\.subscriptionID) == pushes.map { $0.0.id })
        #expect(delivered.allSatisfy { $0.ttl == 120 && $0.vapid.audience == emulator.baseURL })
    }
}
