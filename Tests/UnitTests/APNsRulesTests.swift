import FCM
import Foundation
import JSON
import Testing

/// The Swift side of the APNs rules (Sources/FCM/Rules/apns-rules.json) as a worker uses it on a
/// claimed job: the push type it sends as, and issues naming field and reason. (That SQL says
/// the same words is APNsRegistryTests' table.)
@Suite struct APNsRulesTests {
    static let token = String(repeating: "ab", count: 32)
    let rules = APNsMessageRules.standard

    func message(_ text: String) throws -> JSONValue { try JSONValue.parse(text) }

    @Test func thePushTypeIsTheHeaderOrAlertWhenThereIsNone() throws {
        #expect(rules.pushType(of: try message(#"{"apns": {"payload": {"aps": {}}}}"#))?.name == "alert")
        let voip = try #require(rules.pushType(of: try message(#"{"apns": {"headers": {"apns-push-type": "voip"}}}"#)))
        #expect(voip.name == "voip" && voip.maxPayloadBytes == 5120)
        let background = try #require(rules.pushType(of: try message(#"{"apns": {"headers": {"apns-push-type": "background"}}}"#)))
        #expect(background.priorities == ["1", "5"])
        #expect(rules.pushType(of: try message(#"{"apns": {"headers": {"apns-push-type": "banner"}}}"#)) == nil)
        #expect(rules.pushType(of: try message(#"{"apns": {"headers": {"apns-push-type": 3}}}"#)) == nil)
    }

    @Test func anIssueCarriesItsFieldAndReasonApart() throws {
        let issues = rules.validate(try message(#"{"apns_token": "\#(Self.token)", "apns": {"headers": {"apns-push-type": "liveactivity"}, "payload": {"aps": {"event": "update"}}}}"#))
        #expect(issues == [APNsIssue(field: "message.apns.payload.aps.timestamp", reason: "required for push type liveactivity")])
        #expect(issues.first?.description == "message.apns.payload.aps.timestamp: required for push type liveactivity")
    }

    @Test func thePayloadIsMeasuredAsTheSenderWritesIt() throws {
        // Compact JSON: 20 bytes around the text, which counts its UTF-8 bytes and escapes.
        let payload = try message(#"{"aps": {"alert": "é\n\u0008"}}"#)
        #expect(APNsMessageRules.payloadBytes(payload) == 20 + 2 + 2 + 6)
        #expect(APNsMessageRules.payloadBytes(payload) == payload.serialized.utf8.count)
    }

    @Test func aBrokenRuleFileIsRefusedSayingWhat() {
        func refusal(_ text: String) -> String {
            do { _ = try APNsMessageRules(json: text); return "" } catch { return error.description }
        }
        #expect(refusal("[]").contains("not an object"))
        #expect(refusal(#"{"format": 2}"#).contains("format 2, this build understands 1"))
        var broken = APNsMessageRules.json.replacingOccurrences(of: #""default_push_type": "alert""#, with: #""default_push_type": "banner""#)
        #expect(refusal(broken).contains("default_push_type is not in push_types"))
        broken = APNsMessageRules.json.replacingOccurrences(of: #", "message": "header.apns_id""#, with: "")
        #expect(refusal(broken).contains("header apns-id is bounded but names no message"))
        broken = APNsMessageRules.json.replacingOccurrences(of: #""default_priority": "5""#, with: #""default_priority": "7""#)
        #expect(refusal(broken).contains("default_priority is not in priorities"))
        broken = APNsMessageRules.json.replacingOccurrences(of: #"{"name": "apns-priority"},"#, with: "")
        #expect(refusal(broken).contains("headers must list push_type_header and priority_header"))
        broken = APNsMessageRules.json.replacingOccurrences(of: #""type": "integer""#, with: #""type": "number""#)
        #expect(refusal(broken).contains("aps field type number is neither string nor integer"))
    }
}
