/// What an APNs key the emulator issued is for: its key ID, team ID and app (bundle ID, the
/// `apns-topic` of its alerts), written as one line above the key's PEM block in the `.p8` file
/// (`writeAPNsKey`). A PEM reader skips text before `-----BEGIN` (RFC 7468 calls it
/// explanatory text), so the file is still a `.p8` key to Herald and to any other reader.
/// An emulator that loads the file later (`herald emulator --apns-keys`, the one in
/// `herald work --emulator`) reads the line, and so checks a registry entry's key ID, team ID and
/// topic against what the key was issued for instead of taking them from the entry: a mistyped
/// team ID or topic is refused as Apple refuses it.
public struct APNsKeyIssue: Sendable, Equatable {
    public var keyID: String
    public var teamID: String
    public var topic: String

    public init(keyID: String, teamID: String, topic: String) {
        self.keyID = keyID
        self.teamID = teamID
        self.topic = topic
    }

    static let marker = "Herald emulator APNs key:"

    /// A bundle ID as the registry takes one: a letter or digit, then letters, digits, - and .
    public static func isBundleID(_ text: String) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= 155 else { return false }
        func alnum(_ c: UInt8) -> Bool { (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) }
        return alnum(first) && text.utf8.allSatisfy { alnum($0) || $0 == 0x2D || $0 == 0x2E }
    }

    /// A registry name for the app of `topic` to suggest: its last part, lowercased, and -ios
    /// (com.example.shop: shop-ios).
    public static func appName(topic: String) -> String {
        let last = topic.split(separator: ".").last.map(String.init) ?? "app"
        let slug = String(last.lowercased().unicodeScalars.filter { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" })
        return (slug.isEmpty ? "app" : String(slug.prefix(58))) + "-ios"
    }

    /// The line written above the PEM block.
    public var line: String { "\(Self.marker) key_id=\(keyID) team_id=\(teamID) topic=\(topic)" }

    /// The issue line of a key file's text, or nil for a key the emulator did not issue (one of
    /// Apple's, say).
    public init?(pem: String) {
        guard let line = pem.split(separator: "\n", omittingEmptySubsequences: true)
            .prefix(while: { !$0.hasPrefix("-----BEGIN") }).first(where: { $0.hasPrefix(Self.marker) }) else { return nil }
        var fields: [String: String] = [:]
        for word in line.dropFirst(Self.marker.count).split(separator: " ") {
            let pair = word.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
        }
        guard let keyID = fields["key_id"], let teamID = fields["team_id"], let topic = fields["topic"] else { return nil }
        self.init(keyID: keyID, teamID: teamID, topic: topic)
    }
}
