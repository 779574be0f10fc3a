import FCM
import JSON

/// Why a message cannot become an APNs request, naming the field and what to do.
public struct APNsRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The message's field at fault, e.g. `apns.headers.apns-priority`.
    public var field: String
    public var message: String
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
}

/// One header of an APNs request.
public struct APNsHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// The HTTP/2 request for one APNs job, without the `authorization` header (the provider token
/// is the sender's, added when it goes out).
///
/// Made from a message `{"apns_token": HEX, "apns": {"headers": {...}, "payload": {...}}}`, the
/// app's bundle ID, the job's ID and its time to live:
/// - `:path` `/3/device/<token>` (the token's hex digits, lowercased);
/// - `apns-push-type` as the message says, else the `default_push_type` of the APNs rule file the
///   message was validated against (Sources/FCM/Rules/apns-rules.json), `alert`;
/// - `apns-topic` the bundle ID with the suffix the push type needs (`APNsPushType.topicSuffix`);
///   a message may not set it;
/// - `apns-priority` as the message says (as the push type allows), else the push type's default
///   (5 for background, 10 for the rest);
/// - `apns-expiration` now plus the job's TTL (0 when the TTL is 0: deliver now or never); without
///   a TTL the message's own value, if any;
/// - `apns-id` the message's (a canonical UUID) or one made from the job's ID, so every retry of
///   a job carries the same;
/// - `apns-collapse-id` as the message says (at most 64 bytes);
/// - the body: the payload, serialized.
///
/// The headers a message may set, the push types and the bounds of the header values are the rule
/// file's, and a refusal says what herald.validate_apns_message says at enqueue, so a message
/// refused here was refused there.
public struct APNsRequest: Sendable, Equatable {
    /// The device token, lowercase hex.
    public var deviceToken: String
    public var pushType: APNsPushType
    public var topic: String
    public var priority: Int
    public var apnsID: String
    /// Seconds since 1970, or nil to leave the header out.
    public var expiration: Int64?
    public var collapseID: String?
    public var body: [UInt8]

    /// `/3/device/<token>`.
    public var path: String { "/3/device/" + deviceToken }

    /// The request's headers in the order they are sent (authorization not included).
    public var headers: [APNsHeader] {
        var headers = [APNsHeader("apns-push-type", pushType.rawValue), APNsHeader("apns-topic", topic),
                       APNsHeader("apns-priority", String(priority)), APNsHeader("apns-id", apnsID)]
        if let expiration { headers.append(APNsHeader("apns-expiration", String(expiration))) }
        if let collapseID { headers.append(APNsHeader("apns-collapse-id", collapseID)) }
        return headers
    }

    /// Header lines (`name: value`) for an HTTP client, the bearer token first:
    /// `sharedHeaderLines` and then `ownHeaderLines`.
    public func headerLines(providerToken: String) -> [String] {
        Self.sharedHeaderLines(providerToken: providerToken, pushType: pushType, topic: topic, priority: priority) + ownHeaderLines
    }

    /// The header lines every request of one app sends alike while its provider token, the push
    /// type and the priority stay the same: a sender keeps them (`HTTPRequest.headers`) and
    /// adds each request's `ownHeaderLines` (`HTTPRequest.varyingHeaders`).
    public static func sharedHeaderLines(providerToken: String, pushType: APNsPushType, topic: String, priority: Int) -> [String] {
        ["authorization: bearer " + providerToken, "content-type: application/json", "apns-push-type: " + pushType.rawValue,
         "apns-topic: " + topic, "apns-priority: " + String(priority)]
    }

    /// The header lines of this request alone: `apns-id`, and `apns-expiration` and
    /// `apns-collapse-id` when it has them.
    public var ownHeaderLines: [String] {
        var lines = ["apns-id: " + apnsID]
        if let expiration { lines.append("apns-expiration: " + String(expiration)) }
        if let collapseID { lines.append("apns-collapse-id: " + collapseID) }
        return lines
    }

    /// The headers a message may set in `apns.headers` (the rule file's `headers`); the rest are
    /// Herald's.
    public static let senderHeaders: [String] = APNsMessageRules.standard.headers.map(\.name)

    /// - Parameters:
    ///   - message: the job's message.
    ///   - bundleID: the app's bundle ID (its topic for alert and background pushes).
    ///   - jobID: the job's ID, from which `apns-id` is made.
    ///   - ttlSeconds: how long the job may still wait for delivery; nil: no limit set by Herald.
    ///   - now: seconds since 1970, for `apns-expiration`.
    ///   - payload: the message's payload already written as compact JSON, e.g. by
    ///     `APNsMessageRules.validate(_:payload:)`; when empty, it is written here.
    public init(message: JSONValue, bundleID: String, jobID: Int64, ttlSeconds: Int64?, now: Int64,
                payload written: [UInt8] = []) throws(APNsRequestError) {
        guard let token = message["apns_token"]?.stringValue else {
            throw APNsRequestError(field: "apns_token", message: "an APNs message needs apns_token, the device token in hex")
        }
        let tokenBytes = token.utf8
        guard !tokenBytes.isEmpty, tokenBytes.count % 2 == 0, tokenBytes.allSatisfy(isHexDigit) else {
            throw APNsRequestError(field: "apns_token", message: "must be the device token as an even number of hex digits (0-9, a-f)")
        }
        // Hex digits: lowercased only when some are capitals (tokens are mostly written lowercase).
        deviceToken = tokenBytes.contains { $0 >= 0x41 && $0 <= 0x46 } ? token.lowercased() : token
        guard let apns = message["apns"]?.objectValue else {
            throw APNsRequestError(field: "apns", message: "an APNs message needs the apns object with its payload")
        }
        guard let payload = apns["payload"], payload.objectValue != nil else {
            throw APNsRequestError(field: "apns.payload", message: "must be a JSON object holding aps")
        }
        // The values the message gives, each header judged in byte order of the names (so the
        // first refusal named is the one herald.validate_apns_message names first).
        var givenPushType: String?, givenPriority: String?, givenID: String?, givenExpiration: String?, givenCollapseID: String?
        if let headers = apns["headers"] {
            guard let object = headers.objectValue else {
                throw APNsRequestError(field: "apns.headers", message: "must be an object of header names and values")
            }
            let rules = APNsMessageRules.standard
            let members = object.count < 2 ? object.members
                : object.members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            for member in members {
                let name = member.key
                if member.value.isNull { continue }
                guard let text = member.value.stringValue else {
                    throw APNsRequestError(field: "apns.headers" + APNsMessageRules.member(name), message: rules.headerReason(name, nil)
                                           ?? "expected a string, got \(member.value.typeName)")
                }
                if let reason = rules.headerReason(name, text) {
                    throw APNsRequestError(field: "apns.headers" + APNsMessageRules.member(name), message: reason)
                }
                switch name {
                case "apns-push-type": givenPushType = text
                case "apns-priority": givenPriority = text
                case "apns-id": givenID = text
                case "apns-expiration": givenExpiration = text
                case "apns-collapse-id": givenCollapseID = text
                default: break  // a header the rule file lists that the request does not set
                }
            }
        }

        if let text = givenPushType {
            guard let type = APNsPushType(rawValue: text) else {
                throw APNsRequestError(field: "apns.headers.apns-push-type",
                                       message: APNsMessageRules.standard.pushTypeReason(text) ?? "not a push type Herald sends")
            }
            pushType = type
        } else {
            pushType = .standardDefault
        }
        topic = pushType.topic(bundleID: bundleID)
        if let text = givenPriority {
            let rules = APNsMessageRules.standard
            let typeName = pushType.rawValue
            if let reason = rules.priorityReason(text, pushType: rules.pushTypes.first { $0.name == typeName }) {
                throw APNsRequestError(field: "apns.headers.apns-priority", message: reason)
            }
            guard let value = Int(text), pushType.allows(priority: value) else {
                throw APNsRequestError(field: "apns.headers.apns-priority", message: "\(text) is not a priority push type \(pushType.rawValue) takes")
            }
            priority = value
        } else {
            priority = pushType.defaultPriority
        }
        if let text = givenID {
            guard APNsIdentifier.isCanonical(text) else {
                throw APNsRequestError(field: "apns.headers.apns-id", message: "must be a UUID such as 123e4567-e89b-12d3-a456-426614174000, or left out")
            }
            apnsID = text.lowercased()
        } else {
            apnsID = APNsIdentifier.forJob(jobID)
        }
        if let ttlSeconds {
            expiration = ttlSeconds <= 0 ? 0 : now + ttlSeconds
        } else if let text = givenExpiration {
            // Whole seconds in at most the rule file's digits (headerReason above), so it fits.
            guard let value = Int64(text) else {
                throw APNsRequestError(field: "apns.headers.apns-expiration", message: "expected whole seconds since 1970, got '\(text)'")
            }
            expiration = value
        } else {
            expiration = nil
        }
        if let text = givenCollapseID {
            collapseID = text  // within the rule file's bytes (headerReason above)
        } else {
            collapseID = nil
        }
        if written.isEmpty {
            var out: [UInt8] = []
            out.reserveCapacity(256)
            payload.write(into: &out)
            body = out
        } else {
            body = written
        }
    }
}

extension APNsRequest {
    /// Whether `message`'s payload is shaped like a Live Activity update: `aps.event` with
    /// `aps.content-state` or `aps.timestamp` (what Apple's liveactivity pushes carry). Such a
    /// payload sent as an alert is not a Live Activity update on the device.
    public static func isLiveActivityShaped(_ message: JSONValue) -> Bool {
        guard let aps = message["apns"]?["payload"]?["aps"]?.objectValue, aps["event"]?.stringValue != nil else { return false }
        return aps["content-state"] != nil || aps["timestamp"] != nil
    }
}
