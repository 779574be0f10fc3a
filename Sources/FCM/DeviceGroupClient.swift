import Foundation
import HTTPClient
import JSON

/// A device-group call that failed: `classification` says what FCM's answer means (nil when
/// the request could not even be built, e.g. no access token).
public struct DeviceGroupError: Error, Sendable, CustomStringConvertible {
    public var classification: SendClassification?
    public var message: String
    /// The HTTP status of FCM's answer; nil when there was none.
    public var httpStatus: Int?

    public init(classification: SendClassification?, message: String, httpStatus: Int? = nil) {
        self.classification = classification
        self.message = message
        self.httpStatus = httpStatus
    }

    public var description: String { message }
}

/// Device-group management (`/fcm/notification`), synchronous: for `herald groups` and the
/// worker's group operations.
public struct DeviceGroupClient {
    public let endpoint: FCMEndpoint
    public let auth: AccessTokenProvider
    public let client: HTTPClient

    public init(endpoint: FCMEndpoint, auth: AccessTokenProvider, client: HTTPClient) {
        self.endpoint = endpoint
        self.auth = auth
        self.client = client
    }

    /// Carries out a planned change; returns the group's `notification_key`.
    public func perform(_ plan: DeviceGroupPlan) throws(DeviceGroupError) -> String {
        try send(.change(plan.operation), name: plan.name, key: plan.key, tokens: plan.tokens)
    }

    /// Creates the group `name` with `tokens`; returns its `notification_key`.
    public func create(name: String, tokens: [String]) throws(DeviceGroupError) -> String {
        try send(.change(.create), name: name, key: nil, tokens: tokens)
    }

    /// Adds `tokens` to the group (at most 20 members in all).
    public func add(name: String, key: String, tokens: [String]) throws(DeviceGroupError) -> String {
        try send(.change(.add), name: name, key: key, tokens: tokens)
    }

    /// Removes `tokens`; removing every member deletes the group.
    public func remove(name: String, key: String, tokens: [String]) throws(DeviceGroupError) -> String {
        try send(.change(.remove), name: name, key: key, tokens: tokens)
    }

    /// The group's `notification_key`, or nil when there is no group of that name.
    public func get(name: String) throws(DeviceGroupError) -> String? {
        do {
            return try send(.get, name: name, key: nil, tokens: [])
        } catch {
            if error.httpStatus == 404 { return nil }
            throw error
        }
    }

    /// What a request does: look a group up by name, or change it.
    public enum Request: Sendable, Equatable {
        case get
        case change(DeviceGroupOperation)

        var name: String {
            switch self {
            case .get: return "get"
            case .change(let operation): return operation.rawValue
            }
        }
    }

    /// The request for a planned change (POST).
    public func request(_ plan: DeviceGroupPlan) throws(DeviceGroupError) -> HTTPRequest {
        try request(.change(plan.operation), name: plan.name, key: plan.key, tokens: plan.tokens)
    }

    /// The request for one operation: a change (POST) or `get` (GET by name).
    public func request(_ kind: Request, name: String, key: String?, tokens: [String]) throws(DeviceGroupError) -> HTTPRequest {
        let authorization: String
        do {
            authorization = try auth.authorizationHeader()
        } catch {
            throw DeviceGroupError(classification: nil, message: "device group \(kind.name) \(name): \(error)")
        }
        let headers = ["Content-Type: application/json", "access_token_auth: true",
                       "Authorization: \(authorization)", "project_id: \(endpoint.projectID)"]
        switch kind {
        case .get:
            var allowed = CharacterSet.alphanumerics
            allowed.insert(charactersIn: "-._~")
            let encoded = name.addingPercentEncoding(withAllowedCharacters: allowed) ?? name
            return HTTPRequest(method: "GET", url: endpoint.deviceGroupURL + "?notification_key_name=" + encoded, headers: headers)
        case .change(let operation):
            var body = JSONObject()
            body["operation"] = .string(operation.rawValue)
            body["notification_key_name"] = .string(name)
            if operation != .create {
                guard let key, !key.isEmpty else {
                    throw DeviceGroupError(classification: nil, message: "device group \(operation.rawValue) \(name): a notification_key is required")
                }
                body["notification_key"] = .string(key)
            }
            body["registration_ids"] = .array(tokens.map { .string($0) })
            return HTTPRequest(method: "POST", url: endpoint.deviceGroupURL, headers: headers,
                               body: Array(JSONValue.object(body).serialized.utf8))
        }
    }

    /// Sends one operation; on a refused access token renews it once and tries again.
    private func send(_ kind: Request, name: String, key: String?, tokens: [String]) throws(DeviceGroupError) -> String {
        let operation = kind.name
        var attempt = 0
        while true {
            attempt += 1
            let request = try self.request(kind, name: name, key: key, tokens: tokens)
            let authorization = request.headers.first { $0.hasPrefix("Authorization: ") }.map { String($0.dropFirst("Authorization: ".count)) } ?? ""
            let response: HTTPResponse
            do {
                response = try client.perform(request)
            } catch {
                let classification = SendClassification(transport: TransportFailure(error))
                throw DeviceGroupError(classification: classification, message: "device group \(operation) \(name): \(error)")
            }
            let secrets = [authorization, String(authorization.dropFirst("Bearer ".count))] + tokens + (key.map { [$0] } ?? [])
            let classification = SendClassification(httpStatus: response.status, headers: response.headers, body: response.body,
                                                    now: Date(), redacting: secrets.filter { !$0.isEmpty })
            switch classification {
            case .delivered(let notificationKey):
                guard !notificationKey.isEmpty else {
                    throw DeviceGroupError(classification: classification,
                                           message: "device group \(operation) \(name): FCM answered \(response.status) without a notification_key")
                }
                return notificationKey
            case .reauthenticate where attempt == 1:
                auth.invalidate(ifHeader: authorization)
                continue
            default:
                throw DeviceGroupError(classification: classification,
                                       message: "device group \(operation) \(name): FCM answered \(response.status): \(classification.reason ?? "")",
                                       httpStatus: response.status)
            }
        }
    }
}
