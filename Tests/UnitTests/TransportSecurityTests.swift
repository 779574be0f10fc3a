import Emulator
import FCM
import Foundation
import Queue
import Testing

/// Credentials only over TLS: which URLs may carry them, and a registry key whose token_uri is
/// plain http to another host (the pool pauses its project with this reason).
@Suite struct TransportSecurityTests {
    @Test func onlyHTTPSOrLoopbackMayCarryCredentials() {
        for safe in ["https://fcm.googleapis.com", "HTTPS://fcm.googleapis.com", "http://127.0.0.1:8085", "http://127.8.9.10",
                     "http://localhost:8080", "http://LOCALHOST", "http://[::1]:8085"] {
            #expect(TransportSecurity.cleartextHost(safe) == nil, "\(safe)")
            #expect(TransportSecurity.refusal(safe, setting: "HERALD_FCM_URL", allowed: false) == nil)
        }
        for unsafe in ["http://fcm.example.invalid", "http://192.0.2.1:8080", "http://127.0.0.1.example.invalid",
                       "http://localhost.example.invalid", "http://[::2]:80", "http://128.0.0.1", "ftp://127.0.0.1.nip.invalid"] {
            #expect(TransportSecurity.cleartextHost(unsafe) != nil, "\(unsafe)")
            let refusal = TransportSecurity.refusal(unsafe, setting: "--fcm-url", allowed: false)
            #expect(refusal?.hasPrefix("--fcm-url is \(unsafe): plain http") == true, "\(refusal ?? "nil")")
            #expect(refusal?.contains("--allow-insecure-transport") == true)
            #expect(TransportSecurity.refusal(unsafe, setting: "--fcm-url", allowed: true) == nil, "allowed explicitly")
        }
        #expect(TransportSecurity.allowsInsecure(["HERALD_ALLOW_INSECURE_TRANSPORT": "1"]))
        #expect(!TransportSecurity.allowsInsecure(["HERALD_ALLOW_INSECURE_TRANSPORT": "0"]))
        #expect(!TransportSecurity.allowsInsecure([:]))
    }

    @Test func aRegistryKeyWithAPlainHTTPTokenURIIsRefusedNamingIt() throws {
        let emulator = EmulatorServer(configuration: EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1))
        try emulator.start()
        defer { emulator.stop() }
        let json = try emulator.serviceAccountJSON(projectID: "shop-prod")
            .replacingOccurrences(of: emulator.tokenURI.replacingOccurrences(of: "/", with: "\\/"), with: "http://192.0.2.1/token")
            .replacingOccurrences(of: emulator.tokenURI, with: "http://192.0.2.1/token")
        let project = Project(name: "shop", fcmProjectID: "shop-prod", credentials: "env:SHOP_KEY")
        #expect(throws: Project.Problem.self) { try project.account(environment: ["SHOP_KEY": json]) }
        do { _ = try project.account(environment: ["SHOP_KEY": json]) } catch {
            #expect("\(error)" == "project shop: the key env:SHOP_KEY has token_uri http://192.0.2.1/token: plain http to 192.0.2.1, which would send its signed grant and receive the access token unencrypted; use a key whose token_uri is https (Google's is https://oauth2.googleapis.com/token), or pass --allow-insecure-transport (HERALD_ALLOW_INSECURE_TRANSPORT=1) if the network in between is trusted")
        }
        let allowed = try project.account(environment: ["SHOP_KEY": json, "HERALD_ALLOW_INSECURE_TRANSPORT": "1"])
        #expect(allowed.tokenURI == "http://192.0.2.1/token")
        // The emulator's own key (token_uri on loopback) is fine without the flag.
        let local = Project(name: "local", fcmProjectID: "local", credentials: "env:LOCAL_KEY")
        #expect(try local.account(environment: ["LOCAL_KEY": emulator.serviceAccountJSON(projectID: "local")]).projectID == "local")
    }

    @Test func aKeyFileOthersMayReadIsWarnedAbout() throws {
        let path = NSTemporaryDirectory() + "herald-key-mode-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "{}".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        #expect(KeyFilePermissions.warning(path: path) == nil)
        chmod(path, 0o640)
        #expect(KeyFilePermissions.warning(path: path) == "the key file \(path) may be read by its group (mode 640): a private key should be readable by its owner only; run chmod 600 \(path)")
        chmod(path, 0o644)
        #expect(KeyFilePermissions.warning(path: path)?.contains("may be read by any user (mode 644)") == true)
    }
}
