import CommandOptions
import FCM
import Foundation
import HTTPClient
import JSON
import Logging
import Worker

enum SendCommand {
    static let options: [Option] = [
        Option(name: "token", value: "TOKEN", help: "Send to this registration token (or a device group's notification_key)."),
        Option(name: "topic", value: "NAME", help: "Send to this topic."),
        Option(name: "condition", value: "EXPR", help: "Send to a topic condition, e.g. \"'a' in topics && 'b' in topics\"."),
        Option(name: "fid", value: "FID", help: "Send to this Firebase installation ID."),
        Option(name: "title", value: "TEXT", help: "notification.title."),
        Option(name: "body", value: "TEXT", help: "notification.body."),
        Option(name: "data", value: "KEY=VALUE", repeatable: true, help: "A data entry."),
        Option(name: "message", value: "FILE", help: "A v1 Message as JSON (or {\"message\": ...}); the flags above override its parts."),
        Option(name: "validate-only", help: "Ask FCM to validate without delivering."),
        Option(name: "legacy", value: "FILE", help: "A request body of FCM's retired legacy API (JSON, docs/legacy.md Table 1), sent as its HTTP v1 translation, one request per target; a multicast also prints the legacy response."),
        Option(name: "form", help: "With --legacy: FILE holds the plain-text form (docs/legacy.md 4.9, registration_id=...&data.k=v)."),
        Option(name: "extra-field", value: "PATH", repeatable: true,
               help: "Also accept this message field, e.g. message.android.new_option (one FCM added after this release; herald work reads them from herald.message_extra_fields)."),
        emulatorOption,
    ] + connectionOptions.filter { $0.name != "database-url" }

    static let help = helpText(
        command: "send", summary: "Send one message now and print FCM's answer (the message name, or the classified error and what to do).",
        usage: "(--token T | --topic T | --condition C | --fid F) [--title T] [--body B] [--data k=v ...] [--message FILE] | --legacy FILE [--form]",
        options: options,
        footer: """
        Needs GOOGLE_APPLICATION_CREDENTIALS (or --credentials); without them it sends nothing and
        exits 2. --emulator sends to a local FCM emulator started for the call instead (for trying
        messages out: nothing reaches a device). Exit status: 0 delivered, 1 refused, 2 usage.
        """)

    static func message(_ parsed: ParsedOptions) throws -> JSONValue {
        var message = JSONObject()
        if let path = parsed.string("message") {
            let text: String
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw UsageError("herald send: --message \(path): cannot read the file (\(error.localizedDescription))")
            }
            let parsedJSON: JSONValue
            do { parsedJSON = try JSONValue.parse(text) } catch {
                throw UsageError("herald send: --message \(path): not valid JSON (\(error))")
            }
            let inner = parsedJSON["message"] ?? parsedJSON
            guard case .object(let object) = inner else {
                throw UsageError("herald send: --message \(path): must hold a JSON object (a v1 Message)")
            }
            message = object
        }
        let targets = ["token", "topic", "condition", "fid"].filter { parsed.string($0) != nil }
        if targets.count > 1 { throw UsageError("herald send: give one of --token, --topic, --condition or --fid, not \(targets.map { "--" + $0 }.joined(separator: " and "))") }
        if let target = targets.first {
            for key in ["token", "topic", "condition", "fid"] { message[key] = nil }
            message[target] = .string(parsed.string(target)!)
        }
        if parsed.string("title") != nil || parsed.string("body") != nil {
            var notification = message["notification"]?.objectValue ?? JSONObject()
            if let title = parsed.string("title") { notification["title"] = .string(title) }
            if let body = parsed.string("body") { notification["body"] = .string(body) }
            message["notification"] = .object(notification)
        }
        let pairs = parsed.all("data")
        if !pairs.isEmpty {
            var data = message["data"]?.objectValue ?? JSONObject()
            for pair in pairs {
                guard let equals = pair.firstIndex(of: "=") else {
                    throw UsageError("herald send: --data \"\(pair)\" is not KEY=VALUE")
                }
                data[String(pair[..<equals])] = .string(String(pair[pair.index(after: equals)...]))
            }
            message["data"] = .object(data)
        }
        return .object(message)
    }

    /// `--extra-field` paths, shaped like the rows of herald.message_extra_fields.
    static func extraFields(_ parsed: ParsedOptions) throws(UsageError) -> Set<String> {
        var paths: Set<String> = []
        for path in parsed.all("extra-field") {
            let segments = path.split(separator: ".", omittingEmptySubsequences: false)
            let wellFormed = segments.count >= 2 && segments[0] == "message" && segments.dropFirst().allSatisfy { segment in
                !segment.isEmpty && segment.utf8.allSatisfy { byte in
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                        || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                }
            }
            guard wellFormed else {
                throw UsageError("herald send: --extra-field \"\(path)\" is not a field path; give message. and the member names, e.g. message.android.new_option")
            }
            paths.insert(path)
        }
        return paths
    }

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "send", arguments: arguments, options: options)
        if let path = parsed.string("legacy") { return try runLegacy(parsed, path: path) }
        if parsed.has("form") { throw UsageError("herald send: --form describes the --legacy FILE; give --legacy too") }
        let log = try RunEnvironment.logger(parsed, prefix: "herald send")
        let message = try message(parsed)
        let extraFields = try Self.extraFields(parsed)
        let issues = MessageValidator.validate(message, extraFields: extraFields)
        if !issues.isEmpty {
            tell(log, .error, "herald send: the message is invalid; nothing was sent:\n" + issues.map { "  \($0.description)" }.joined(separator: "\n"))
            return 1
        }
        let environment = RunEnvironment(log: log)
        defer { environment.shutdown() }
        let fcm = try environment.connectFCM(parsed)
        let body = FCMEndpoint.sendBody(messageJSON: Array(message.serialized.utf8), validateOnly: parsed.has("validate-only"))
        return report(try send(body, over: fcm), project: fcm.account.projectID, emulated: environment.emulator != nil, log: log)
    }

    /// What the command has to say on stderr: as it is with `--log-format text`, as one record of
    /// the log with `--log-format json`, so a script reading JSON lines meets no plain one.
    static func tell(_ log: Logger?, _ level: Logger.Level, _ text: String) {
        guard let log, log.format == .json else { return printError(text) }
        log.log(level, text.hasPrefix("herald send: ") ? String(text.dropFirst("herald send: ".count)) : text)
    }

    static func report(_ classification: SendClassification, project: String, emulated: Bool = false, log: Logger? = nil) -> Int32 {
        switch classification {
        case .delivered(let name):
            print(name)
            if emulated { tell(log, .info, "herald send: delivered to the local FCM emulator (--emulator), not to a device") }
            return 0
        case .pruneToken(let code, let message):
            tell(log, .error, "herald send: \(code): \(message)\n  The token is no longer valid: remove it from your token table (herald work calls herald.prune_token for you).")
        case .deadLetter(let code, let message):
            let advice: String
            switch code {
            case "SENDER_ID_MISMATCH": advice = "The token belongs to another Firebase project than \(project): use that project's credentials."
            case "THIRD_PARTY_AUTH_ERROR": advice = "FCM could not reach APNs or Web Push with the credentials in the Firebase console: renew them there."
            default: advice = "Fix the message; sending it again unchanged will fail the same way."
            }
            tell(log, .error, "herald send: \(code): \(message)\n  \(advice)")
        case .retry(let code, let message, let retryAfter, _):
            let when = retryAfter.map { "after \(Int($0.rounded(.up))) s" } ?? "later, with backoff"
            tell(log, .error, "herald send: \(code): \(message)\n  Temporary: try again \(when) (herald work retries this for you).")
        case .reauthenticate(let message):
            tell(log, .error, "herald send: UNAUTHENTICATED: \(message)\n  FCM refused the access token twice: check that the service account may send with Firebase Cloud Messaging.")
        }
        return 1
    }
}
