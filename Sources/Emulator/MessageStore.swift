import JSON
import Synchronization

/// One message as the emulator delivered it.
public struct DeliveredMessage: Sendable {
    /// 1, 2, 3... in delivery order over the whole emulator.
    public var sequence: Int
    /// `projects/{project}/messages/{id}`, as answered to the sender.
    public var name: String
    public var projectID: String
    /// `token:...`, `topic:...`, `condition:...` or `fid:...`: where it went.
    public var target: String
    /// The group's notification key when the message reached this token through a device group.
    public var deviceGroup: String?
    /// The topic when the message reached this token as one of the topic's subscribers.
    public var viaTopic: String? = nil
    /// Milliseconds since 1970 when it arrived.
    public var receivedAtMilliseconds: Int64
    /// The request body as received (the `message` object is inside it).
    public var body: [UInt8]

    /// The `message` object as the sender wrote it.
    public var message: JSONValue {
        (try? JSONValue.parse(body))?["message"] ?? .null
    }

    /// The registration token for token targets.
    public var token: String? { target.hasPrefix("token:") ? String(target.dropFirst(6)) : nil }

    var json: JSONValue {
        var object = JSONObject([
            "sequence": JSONValue(sequence),
            "name": .string(name),
            "project": .string(projectID),
        ])
        if let colon = target.firstIndex(of: ":") {
            object[String(target[..<colon])] = .string(String(target[target.index(after: colon)...]))
        }
        if let deviceGroup { object["device_group"] = .string(deviceGroup) }
        if let viaTopic { object["via_topic"] = .string(viaTopic) }
        object["time"] = .string(Timestamp.rfc3339(milliseconds: receivedAtMilliseconds))
        object["message"] = message
        return .object(object)
    }
}

/// Every delivered message, in order, indexed by target. Bodies are kept as the raw bytes that
/// arrived (no copy, no tree), up to `capacity` messages; past that, deliveries are counted
/// but not kept.
final class MessageStore: Sendable {
    private struct State {
        var records: [DeliveredMessage] = []
        var byTarget: [String: [Int]] = [:]
        var dropped = 0
    }

    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) { self.capacity = capacity }

    func record(_ messages: [DeliveredMessage]) {
        state.withLock { state in
            for message in messages {
                guard state.records.count < capacity else {
                    state.dropped += 1
                    continue
                }
                state.byTarget[message.target, default: []].append(state.records.count)
                state.records.append(message)
            }
        }
    }

    func record(_ message: DeliveredMessage) {
        state.withLock { state in
            guard state.records.count < capacity else {
                state.dropped += 1
                return
            }
            state.byTarget[message.target, default: []].append(state.records.count)
            state.records.append(message)
        }
    }

    /// The messages for `target` (or all), oldest first; with `limit`, the newest `limit` of them.
    func messages(target: String?, limit: Int?) -> [DeliveredMessage] {
        state.withLock { state in
            if let target {
                let indices = state.byTarget[target] ?? []
                let chosen = limit.map { indices.suffix($0) } ?? indices[...]
                return chosen.map { state.records[$0] }
            }
            return Array(limit.map { state.records.suffix($0) } ?? state.records[...])
        }
    }

    var counts: (stored: Int, dropped: Int) { state.withLock { ($0.records.count, $0.dropped) } }

    func reset() { state.withLock { $0 = State() } }
}

enum Timestamp {
    /// `2024-05-01T12:34:56.789Z`.
    static func rfc3339(milliseconds: Int64) -> String {
        let seconds = milliseconds / 1000
        let millis = Int(milliseconds % 1000)
        var days = Int(seconds / 86400)
        let secondOfDay = Int(seconds % 86400)
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        days += 719_468
        let era = days / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        var year = yearOfEra + era * 400
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        if month <= 2 { year += 1 }
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(year)-\(two(month))-\(two(day))T\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)).\(ms)Z"
    }
}
