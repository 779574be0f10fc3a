import APNs
import Crypto
import Glibc
import HTTPServer
import JSON
import Synchronization

/// One push as the emulator's APNs side accepted it.
public struct APNsDelivery: Sendable {
    /// 1, 2, 3... in order of acceptance.
    public var sequence: Int
    /// The device token from the path.
    public var deviceToken: String
    /// The request's `apns-id`, or the one the emulator made when it carried none.
    public var apnsID: String
    /// Whether the request carried its own `apns-id`.
    public var apnsIDGiven: Bool
    /// `kid` and `iss` of the provider token that authorized it.
    public var keyID: String
    public var teamID: String
    /// The provider token itself (to count distinct tokens; never logged by the emulator).
    public var providerToken: String
    public var topic: String
    public var pushType: String
    public var priority: Int?
    public var expiration: Int64?
    public var collapseID: String?
    /// Every request header but `authorization`, names lowercased, in order.
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// The client's address and port (one connection).
    public var connection: String
    public var receivedAtMilliseconds: Int64

    /// The body as JSON.
    public var payload: JSONValue { (try? JSONValue.parse(body)) ?? .null }

    var json: JSONValue {
        var object = JSONObject([
            "sequence": JSONValue(sequence), "device_token": .string(deviceToken), "apns_id": .string(apnsID),
            "key_id": .string(keyID), "team_id": .string(teamID), "topic": .string(topic), "push_type": .string(pushType),
        ])
        if let priority { object["priority"] = JSONValue(priority) }
        if let expiration { object["expiration"] = .number(String(expiration)) }
        if let collapseID { object["collapse_id"] = .string(collapseID) }
        object["time"] = .string(Timestamp.rfc3339(milliseconds: receivedAtMilliseconds))
        object["payload"] = payload
        return .object(object)
    }
}

/// Counters of the APNs side, as `EmulatorServer.apnsStatistics` reports them.
public struct APNsStatistics: Sendable, Equatable {
    public var requests = 0
    public var delivered = 0
    public var byStatus: [Int: Int] = [:]
    public var byReason: [String: Int] = [:]
    /// Distinct provider tokens accepted, per key ID.
    public var providerTokensByKey: [String: Int] = [:]
    /// Deliveries past `maxStoredMessages`, counted but not kept.
    public var unstored = 0
}

/// The emulator's stand-in for APNs's provider API (`POST /3/device/{token}`): it checks what
/// Apple documents it checks, in this order, and answers as Apple does (`{"reason": ...}`):
/// 1. the provider token: none, 403 MissingProviderToken; not an ES256 JWT whose `kid` is a key
///    it knows and whose `iss` is that key's team, or an `iat` in the future, 403
///    InvalidProviderToken; an `iat` more than an hour old, 403 ExpiredProviderToken; a token
///    other than the one this connection used for this key, made less than 20 minutes after it,
///    429 TooManyProviderTokenUpdates (Apple's engineers describe the limit per connection);
/// 2. headers: an `apns-push-type` it does not know, 400 InvalidPushType; no `apns-topic`, 400
///    MissingTopic; a topic without the suffix its push type needs (or with another type's),
///    400 BadTopic; a topic whose bundle ID is not one the key was issued for (the emulator is
///    told each key's bundle IDs: `EmulatorConfiguration.apnsTopic`, `trustAPNsKey(topics:)`, or
///    the line the emulator writes above a key it issues), 400 TopicDisallowed; a priority other than 10, 5 or 1, or 10 for a background push, 400
///    BadPriority; an `apns-id` that is not a UUID, 400 BadMessageId; an `apns-expiration` that
///    is not a whole number, 400 BadExpirationDate; an `apns-collapse-id` over 64 bytes, 400
///    BadCollapseId;
/// 3. the device token: not 64 to 200 hex digits, 400 BadDeviceToken;
/// 4. the payload: empty, 400 PayloadEmpty; over 4,096 bytes (5,120 for voip), 413
///    PayloadTooLarge; not a JSON object with an `aps` object, or a Live Activity whose `aps` lacks
///    `event` or `timestamp`, 400 BadPayload (a reason of the emulator's own: Apple's table names
///    none for a payload it cannot read);
/// 5. fault tokens (`APNsFaultToken`).
final class APNsStandIn: Sendable {
    struct Key: Sendable {
        var teamID: String
        var publicKey: P256PublicKey
        /// The bundle IDs the key may push to (its app's: the topic without a push type's suffix).
        var topics: Set<String>
    }

    private struct State {
        var keys: [String: Key] = [:]
        /// Provider tokens whose signature verified, with their `kid`, `iss` and `iat`; emptied
        /// when a key is trusted anew.
        var verified: [String: (keyID: String, teamID: String, issuedAt: Int64)] = [:]
        /// The token each connection last used for each key, and its `iat`.
        var connectionTokens: [String: (token: String, issuedAt: Int64)] = [:]
        var tokensSeen: [String: Set<String>] = [:]
        var attempts: [String: Int] = [:]
        var deliveries: [APNsDelivery] = []
        var stats = APNsStatistics()
        var sequence = 0
    }

    private let state = Mutex(State())
    let capacity: Int
    let maxTokenAge: Int64
    let minimumRenewalGap: Int64

    init(capacity: Int, maxTokenAge: Int64 = 3600, minimumRenewalGap: Int64 = 1200) {
        self.capacity = capacity
        self.maxTokenAge = maxTokenAge
        self.minimumRenewalGap = minimumRenewalGap
    }

    func trust(keyID: String, teamID: String, publicKey: P256PublicKey, topics: Set<String>) {
        state.withLock { s in
            s.keys[keyID] = Key(teamID: teamID, publicKey: publicKey, topics: topics)
            s.verified.removeAll()
        }
    }

    func handle(_ request: HTTPServerRequest, deviceToken: String) -> HTTPServerResponse {
        let now = realtimeSeconds()
        let apnsID = request.header("apns-id")
        let answerID = apnsID.flatMap { APNsIdentifier.isCanonical($0) ? $0 : nil } ?? APNsIdentifier.random()
        func refuse(_ status: Int, _ reason: String, timestamp: Int64? = nil) -> HTTPServerResponse {
            state.withLock { s in
                s.stats.requests += 1
                s.stats.byStatus[status, default: 0] += 1
                s.stats.byReason[reason, default: 0] += 1
            }
            return APNsStandIn.answer(status, reason: reason, apnsID: answerID, timestamp: timestamp)
        }
        guard request.method == "POST" else { return refuse(405, "MethodNotAllowed") }
        guard !deviceToken.isEmpty else { return refuse(400, "MissingDeviceToken") }

        // 1. The provider token.
        guard let authorization = request.header("authorization"), !authorization.isEmpty else {
            return refuse(403, "MissingProviderToken")
        }
        let scheme = authorization.prefix(7).lowercased()
        guard scheme == "bearer " else { return refuse(403, "InvalidProviderToken") }
        let providerToken = String(authorization.dropFirst(7))
        // A token is read and verified once: senders reuse one for up to an hour, and an ECDSA
        // verification per request would make the emulator's CPU the measure of a benchmark.
        let keyID: String, issuer: String, issuedAt: Int64
        if let known = state.withLock({ $0.verified[providerToken] }) {
            (keyID, issuer, issuedAt) = (known.keyID, known.teamID, known.issuedAt)
        } else {
            guard let jwt = JWT.Unverified(providerToken), jwt.header["alg"]?.stringValue == "ES256",
                  let kid = jwt.header["kid"]?.stringValue, let iss = jwt.claims["iss"]?.stringValue,
                  let iat = jwt.claims["iat"]?.doubleValue.map({ Int64($0) }),
                  let key = state.withLock({ $0.keys[kid] }), key.teamID == iss,
                  key.publicKey.verifySHA256(signature: jwt.signature, data: jwt.signingInput)
            else { return refuse(403, "InvalidProviderToken") }
            (keyID, issuer, issuedAt) = (kid, iss, iat)
            state.withLock { s in
                if s.verified.count >= 100_000 { s.verified.removeAll() }
                s.verified[providerToken] = (keyID, issuer, issuedAt)
            }
        }
        let seconds = Int64(now)
        guard issuedAt <= seconds + 60 else { return refuse(403, "InvalidProviderToken") }
        guard seconds - issuedAt <= maxTokenAge else { return refuse(403, "ExpiredProviderToken") }
        let connectionKey = request.remoteAddress + " " + keyID
        let tooSoon = state.withLock { s -> Bool in
            if let previous = s.connectionTokens[connectionKey], previous.token != providerToken {
                // Renewing a token that has expired is what Apple asks for, however soon.
                if issuedAt - previous.issuedAt < minimumRenewalGap && seconds - previous.issuedAt <= maxTokenAge { return true }
            }
            s.connectionTokens[connectionKey] = (providerToken, issuedAt)
            return false
        }
        if tooSoon { return refuse(429, "TooManyProviderTokenUpdates") }

        // 2. Headers.
        let pushTypeName = request.header("apns-push-type") ?? "alert"
        guard let pushType = APNsPushType(rawValue: pushTypeName) else { return refuse(400, "InvalidPushType") }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return refuse(400, "MissingTopic") }
        guard APNsStandIn.topic(topic, fits: pushType) else { return refuse(400, "BadTopic") }
        // The key's app: a push to another bundle ID is refused as Apple refuses a topic the
        // key's team may not push to.
        let bundleID = pushType.topicSuffix.isEmpty ? topic : String(topic.dropLast(pushType.topicSuffix.count))
        if let key = state.withLock({ $0.keys[keyID] }), !key.topics.contains(bundleID) { return refuse(400, "TopicDisallowed") }
        var priority: Int? = nil
        if let text = request.header("apns-priority") {
            guard let value = Int(text), pushType.allows(priority: value) else { return refuse(400, "BadPriority") }
            priority = value
        }
        if let apnsID, !APNsIdentifier.isCanonical(apnsID) { return refuse(400, "BadMessageId") }
        var expiration: Int64? = nil
        if let text = request.header("apns-expiration") {
            guard let value = Int64(text), value >= 0 else { return refuse(400, "BadExpirationDate") }
            expiration = value
        }
        let collapseID = request.header("apns-collapse-id")
        if let collapseID, collapseID.utf8.count > 64 { return refuse(400, "BadCollapseId") }

        // 3. The device token.
        let tokenBytes = Array(deviceToken.utf8)
        guard (64...200).contains(tokenBytes.count), tokenBytes.allSatisfy(isLowerOrUpperHex) else {
            return refuse(400, "BadDeviceToken")
        }

        // 4. The payload.
        guard !request.body.isEmpty else { return refuse(400, "PayloadEmpty") }
        guard request.body.count <= pushType.payloadLimit else { return refuse(413, "PayloadTooLarge") }
        guard let payload = try? JSONValue.parse(request.body), let aps = payload["aps"]?.objectValue else {
            return refuse(400, "BadPayload")
        }
        if pushType == .liveactivity, aps["event"]?.stringValue == nil || aps["timestamp"]?.doubleValue == nil {
            return refuse(400, "BadPayload")
        }

        // 5. Fault tokens.
        let lowered = deviceToken.lowercased()
        if let fault = APNsFaultToken.parse(lowered) {
            let attempt = state.withLock { s -> Int in
                s.attempts[lowered, default: 0] += 1
                return s.attempts[lowered]!
            }
            if let answer = fault.answer(attempt: attempt) {
                return refuse(answer.status, answer.reason, timestamp: answer.status == 410 ? Int64(now * 1000) : nil)
            }
        }

        let headers = request.headers.filter { $0.name.lowercased() != "authorization" }
            .map { HTTPHeader(name: $0.name.lowercased(), value: $0.value) }
        state.withLock { s in
            s.sequence += 1
            s.stats.requests += 1
            s.stats.delivered += 1
            s.stats.byStatus[200, default: 0] += 1
            if s.tokensSeen[keyID, default: []].insert(providerToken).inserted {
                s.stats.providerTokensByKey[keyID, default: 0] += 1
            }
            guard s.deliveries.count < capacity else {
                s.stats.unstored += 1
                return
            }
            s.deliveries.append(APNsDelivery(
                sequence: s.sequence, deviceToken: deviceToken, apnsID: answerID, apnsIDGiven: apnsID != nil, keyID: keyID,
                teamID: issuer, providerToken: providerToken, topic: topic, pushType: pushType.rawValue, priority: priority,
                expiration: expiration, collapseID: collapseID, headers: headers, body: request.body,
                connection: request.remoteAddress, receivedAtMilliseconds: Int64(now * 1000)))
        }
        return HTTPServerResponse(status: 200, headers: [HTTPHeader(name: "apns-id", value: answerID)])
    }

    /// Whether `topic` is a bundle ID with the suffix `pushType` needs: alert and background
    /// topics carry none of the other types' suffixes.
    static func topic(_ topic: String, fits pushType: APNsPushType) -> Bool {
        let suffix = pushType.topicSuffix
        if !suffix.isEmpty { return topic.hasSuffix(suffix) && topic.utf8.count > suffix.utf8.count }
        return !APNsPushType.allCases.contains { !$0.topicSuffix.isEmpty && topic.hasSuffix($0.topicSuffix) }
    }

    static func answer(_ status: Int, reason: String, apnsID: String, timestamp: Int64? = nil) -> HTTPServerResponse {
        var body = JSONObject(["reason": .string(reason)])
        if let timestamp { body["timestamp"] = .number(String(timestamp)) }
        return HTTPServerResponse.json(status, Array(JSONValue.object(body).serialized.utf8),
                                       headers: [HTTPHeader(name: "apns-id", value: apnsID)])
    }

    func deliveries(deviceToken: String?) -> [APNsDelivery] {
        state.withLock { s in
            guard let deviceToken else { return s.deliveries }
            return s.deliveries.filter { $0.deviceToken == deviceToken }
        }
    }

    var statistics: APNsStatistics { state.withLock { $0.stats } }

    var statisticsJSON: JSONValue {
        let stats = statistics
        var byStatus = JSONObject()
        for (status, count) in stats.byStatus.sorted(by: { $0.key < $1.key }) { byStatus[String(status)] = JSONValue(count) }
        var byReason = JSONObject()
        for (reason, count) in stats.byReason.sorted(by: { $0.key < $1.key }) { byReason[reason] = JSONValue(count) }
        var tokens = JSONObject()
        for (key, count) in stats.providerTokensByKey.sorted(by: { $0.key < $1.key }) { tokens[key] = JSONValue(count) }
        return ["requests": JSONValue(stats.requests), "delivered": JSONValue(stats.delivered), "by_status": .object(byStatus),
                "by_reason": .object(byReason), "provider_tokens_by_key": .object(tokens), "unstored": JSONValue(stats.unstored)]
    }

    /// Forgets deliveries, counters, fault attempts and the tokens connections used; keeps the keys.
    func reset() {
        state.withLock { s in
            let keys = s.keys
            s = State()
            s.keys = keys
        }
    }
}

private func isLowerOrUpperHex(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
}
