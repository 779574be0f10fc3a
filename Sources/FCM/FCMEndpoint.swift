import Foundation
import JSON

/// Where one project's FCM requests go.
public struct FCMEndpoint: Sendable {
    /// Without a trailing slash, e.g. `https://fcm.googleapis.com` or `http://127.0.0.1:8085`.
    public var baseURL: String
    public var projectID: String

    public init(baseURL: String, projectID: String) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.projectID = projectID
    }

    /// `{base}/v1/projects/{project}/messages:send`.
    public var sendURL: String { "\(baseURL)/v1/projects/\(projectID)/messages:send" }

    /// `{base}/fcm/notification`, device-group management.
    public var deviceGroupURL: String { "\(baseURL)/fcm/notification" }

    /// `{"message": <messageJSON>}`, with `"validate_only": true` when asked.
    public static func sendBody(messageJSON: [UInt8], validateOnly: Bool = false) -> [UInt8] {
        var body = Array(#"{"message":"#.utf8)
        body.reserveCapacity(messageJSON.count + 40)
        body += messageJSON
        if validateOnly { body += Array(#","validate_only":true"#.utf8) }
        body.append(UInt8(ascii: "}"))
        return body
    }
}
