import Crypto
import FCM
@testable import Queue
import Testing
@testable import Worker

/// The one place a worker asks where each provider's requests go: in test mode every provider,
/// whatever the registry or the other settings say, goes to the emulator in the pool's process.
@Suite struct ProviderEndpointsTests {
    static func app(sandbox: Bool) -> APNsApp {
        APNsApp(name: "shop-ios", keyFile: "/k.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ", topic: "com.example.shop", sandbox: sandbox,
                maxRate: nil, pausedReason: nil, pausedAt: nil, createdAt: "", updatedAt: "")
    }

    @Test func eachProviderGoesWhereItsSettingsSayOutsideTestMode() throws {
        var configuration = WorkerConfiguration(databaseURL: "postgresql://x", credentialsPath: "/sa.json")
        let endpoints = configuration.endpoints
        #expect(endpoints.emulator == nil)
        #expect(endpoints.fcm == "https://fcm.googleapis.com" && endpoints.iid == "https://iid.googleapis.com")
        #expect(endpoints.apns(Self.app(sandbox: false)) == "https://api.push.apple.com")
        #expect(endpoints.apns(Self.app(sandbox: true)) == "https://api.sandbox.push.apple.com")
        configuration.apnsBaseURL = "http://127.0.0.1:8085"
        #expect(configuration.endpoints.apns(Self.app(sandbox: true)) == "http://127.0.0.1:8085", "--apns-url sends every app there")
        let account = ServiceAccount(projectID: "shop-prod", clientEmail: "a@shop-prod.iam.gserviceaccount.com",
                                     tokenURI: "https://oauth2.googleapis.com/token", privateKey: try RSAPrivateKey.generate(bits: 2048))
        #expect(configuration.endpoints.account(account).tokenURI == "https://oauth2.googleapis.com/token", "a key's own token endpoint")
    }

    @Test func testModeSendsEveryProviderToTheEmulatorWhateverElseIsSet() throws {
        var configuration = WorkerConfiguration(databaseURL: "postgresql://x", credentialsPath: "/sa.json")
        configuration.fcmBaseURL = "https://fcm.googleapis.com"
        configuration.iidBaseURL = "https://iid.googleapis.com"
        configuration.apnsBaseURL = "https://api.push.apple.com"
        configuration.emulatorURL = "http://127.0.0.1:40001"
        let endpoints = configuration.endpoints
        #expect(endpoints.fcm == "http://127.0.0.1:40001" && endpoints.iid == "http://127.0.0.1:40001")
        #expect(endpoints.apns(Self.app(sandbox: false)) == "http://127.0.0.1:40001")
        #expect(endpoints.apns(Self.app(sandbox: true)) == "http://127.0.0.1:40001")
        let account = ServiceAccount(projectID: "shop-prod", clientEmail: "a@shop-prod.iam.gserviceaccount.com",
                                     tokenURI: "https://oauth2.googleapis.com/token", privateKey: try RSAPrivateKey.generate(bits: 2048))
        let routed = endpoints.account(account)
        #expect(routed.tokenURI == "http://127.0.0.1:40001/token", "a registry key's grants go to the emulator, not to Google")
        #expect(routed.projectID == "shop-prod" && routed.clientEmail == account.clientEmail)
        #expect(endpoints.apnsDescription == "http://127.0.0.1:40001")
    }
}
