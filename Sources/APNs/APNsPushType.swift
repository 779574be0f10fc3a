/// The values of `apns-push-type` Herald sends, with what Apple ties to each: the suffix the
/// `apns-topic` must carry (Apple's "Sending notification requests to APNs"), the priority Herald
/// uses when the message sets none, the priorities Apple accepts, and the payload limit.
///
/// `mdm` is left out: it needs a certificate connection, and Herald connects with tokens.
/// `fileprovider` and `pushtotalk` are left out until their topic suffixes are checked against
/// Apple's page.
public enum APNsPushType: String, Sendable, Equatable, CaseIterable {
    case alert
    case background
    case location
    case voip
    case complication
    case liveactivity

    /// What follows the app's bundle ID in `apns-topic`.
    public var topicSuffix: String {
        switch self {
        case .alert, .background: return ""
        case .location: return ".location-query"
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .liveactivity: return ".push-type.liveactivity"
        }
    }

    /// `apns-topic` for an app whose bundle ID is `bundleID`.
    public func topic(bundleID: String) -> String { bundleID + topicSuffix }

    /// Apple: background pushes always at 5 (10 is an error); the rest at 10 unless the sender
    /// says otherwise.
    public var defaultPriority: Int { self == .background ? 5 : 10 }

    /// Priorities Apple takes for this push type: 10 (now), 5 (as power allows), 1 (power first);
    /// a background push at 10 is refused.
    public func allows(priority: Int) -> Bool {
        switch priority {
        case 1, 5: return true
        case 10: return self != .background
        default: return false
        }
    }

    /// Largest payload in bytes: 5,120 for VoIP, 4,096 for the rest (Apple's "Generating a remote
    /// notification").
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }
}
