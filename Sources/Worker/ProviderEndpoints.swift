import FCM
import Queue

/// Where each provider's requests go, decided in one place for every part of a worker: FCM's
/// sends, its access tokens and Instance ID's topic calls, and every APNs app's pushes. A provider
/// added later gets its endpoint here too, and so inherits the rule of the test mode:
///
/// With `emulator` set (`herald work --emulator`, and the embedded default), EVERY provider's
/// requests go to that emulator: FCM's sends and topic calls, the access tokens of every
/// registry project's key (whatever its `token_uri` says), every APNs app's pushes (whatever its
/// environment or `--apns-url`). Nothing a worker sends in test mode leaves for a real service,
/// whichever entries the registry holds; the emulator in the pool's process accepts the keys the
/// registry points at (`herald work` tells it them before the workers start).
public struct ProviderEndpoints: Sendable, Equatable {
    /// The in-process emulator's base URL in test mode; nil: each provider's own endpoint.
    public var emulator: String?
    /// FCM's base URL (HERALD_FCM_URL).
    var fcmBaseURL: String
    /// Instance ID's base URL (HERALD_IID_URL).
    var iidBaseURL: String
    /// Every APNs app's base URL (HERALD_APNS_URL); nil: each app's own environment.
    var apnsBaseURL: String?

    /// FCM's base URL for sends and device groups.
    public var fcm: String { emulator ?? fcmBaseURL }
    /// Instance ID's base URL for topic subscriptions.
    public var iid: String { emulator ?? iidBaseURL }

    /// Where APNs app `app`'s pushes go: the emulator in test mode, else `--apns-url` when given,
    /// else Apple's production or sandbox endpoint as the app was registered.
    public func apns(_ app: APNsApp) -> String { emulator ?? apnsBaseURL ?? app.baseURL }

    /// `account` as a worker uses it: in test mode its grants go to the emulator's token
    /// endpoint instead of its `token_uri` (a registry key's is Google's).
    public func account(_ account: ServiceAccount) -> ServiceAccount {
        guard let emulator else { return account }
        var routed = account
        routed.tokenURI = emulator + "/token"
        return routed
    }

    /// How the start-up lines name APNs's endpoint for the apps a worker carries.
    public var apnsDescription: String {
        emulator ?? apnsBaseURL ?? "each app's (\(APNsApp.productionURL), or \(APNsApp.sandboxURL) for a sandbox app)"
    }
}
