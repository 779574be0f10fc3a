import CommandOptions
import FCM
import Foundation
import HTTPClient
import JSON
import Worker

/// `herald send --legacy FILE [--form]`: a payload written for FCM's retired legacy API, sent
/// through HTTP v1 as its translation, one request per target; a multicast also prints the
/// legacy response.
extension SendCommand {
    static func runLegacy(_ parsed: ParsedOptions, path: String) throws -> Int32 {
        let clashing = ["token", "topic", "condition", "title", "body", "message"].filter { parsed.string($0) != nil } + (parsed.all("data").isEmpty ? [] : ["data"])
        if !clashing.isEmpty {
            throw UsageError("herald send: --legacy takes the whole request from \(path); drop \(clashing.map { "--" + $0 }.joined(separator: ", "))")
        }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw UsageError("herald send: --legacy \(path): cannot read the file (\(error.localizedDescription))")
        }
        let form = parsed.has("form")
        let now = Int(Date().timeIntervalSince1970)
        let result: Result<LegacyTranslation, LegacyRejection>
        if form {
            result = LegacyTranslator.translate(form: text.trimmingCharacters(in: .whitespacesAndNewlines), now: now)
        } else {
            do {
                result = LegacyTranslator.translate(try JSONValue.parse(text), now: now)
            } catch {
                throw UsageError("herald send: --legacy \(path): not valid JSON (\(error)); a plain-text body (docs/legacy.md 4.9) needs --form")
            }
        }
        let log = try RunEnvironment.logger(parsed, prefix: "herald send")
        let translation: LegacyTranslation
        switch result {
        case .failure(let rejection):
            SendCommand.tell(log, .error, "herald send: --legacy \(path): \(rejection.description); nothing was sent")
            return 1
        case .success(let accepted):
            translation = accepted
        }
        for note in translation.notes { SendCommand.tell(log, .info, "herald send: note: \(note)") }

        let environment = RunEnvironment(log: log)
        defer { environment.shutdown() }
        let fcm = try environment.connectFCM(parsed)
        let validateOnly = translation.validateOnly || parsed.has("validate-only")
        var results: [JSONValue] = []
        var failures = 0
        for message in translation.messages {
            let body = FCMEndpoint.sendBody(messageJSON: Array(message.serialized.utf8), validateOnly: validateOnly)
            let classification = try send(body, over: fcm)
            let target = ["token", "topic", "condition"].first { message[$0] != nil } ?? "token"
            let label = "\(target) \(message[target]?.stringValue ?? "")"
            if case .delivered(let name) = classification {
                print("\(label): \(name)")
                results.append(["message_id": .string(LegacyResult.messageID(fromName: name))])
            } else {
                failures += 1
                let legacy = LegacyResult.error(for: classification, topic: target != "token") ?? "InternalServerError"
                print("\(label): \(legacy) (\(classification.reason ?? "no answer"))")
                results.append(["error": .string(legacy)])
            }
        }
        if translation.messages.count > 1 {
            // A legacy multicast_id was FCM's number for the request; none exists in v1, so a random one.
            let response: JSONValue = ["multicast_id": JSONValue(Int.random(in: 1...Int(Int64.max))),
                                       "success": JSONValue(results.count - failures), "failure": JSONValue(failures),
                                       "canonical_ids": 0, "results": .array(results)]
            print(response.serialized)
        }
        return failures == 0 ? 0 : 1
    }

    /// One send request, renewing the access token once if FCM refuses it.
    static func send(_ body: [UInt8], over fcm: RunEnvironment.FCMConnection) throws -> SendClassification {
        var reauthenticated = false
        while true {
            let authorization = try fcm.auth.authorizationHeader()
            let request = HTTPRequest(method: "POST", url: fcm.endpoint.sendURL,
                                      headers: ["Authorization: \(authorization)", "Content-Type: application/json"], body: body)
            let secrets = [String(authorization.dropFirst("Bearer ".count))]
            let classification: SendClassification
            do {
                let response = try fcm.client.perform(request)
                classification = SendClassification(httpStatus: response.status, headers: response.headers, body: response.body,
                                                    now: Date(), redacting: secrets)
            } catch {
                classification = SendClassification(transport: TransportFailure(error), redacting: secrets)
            }
            if case .reauthenticate = classification, !reauthenticated {
                reauthenticated = true
                fcm.auth.invalidate(ifHeader: authorization)
                continue
            }
            return classification
        }
    }
}
