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
        let prefix = #"{"message":"#, flag = #","validate_only":true"#
        var body: [UInt8] = []
        // One allocation of the final size: this runs for every message.
        body.reserveCapacity(prefix.utf8.count + messageJSON.count + flag.utf8.count + 1)
        body.append(contentsOf: prefix.utf8)
        body.append(contentsOf: messageJSON)
        if validateOnly { body.append(contentsOf: flag.utf8) }
        body.append(UInt8(ascii: "}"))
        return body
    }
}
