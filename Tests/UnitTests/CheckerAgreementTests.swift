import Emulator
@testable import FCM
import JSON
import Testing

/// The client's `MessageValidator` (what Herald refuses before sending) and the emulator's
/// `RequestChecker` (what FCM refuses on arrival) accept and refuse the same fixture messages,
/// except where they differ on purpose; each such case is listed with its reason, so a new
/// difference, or a listed one that no longer holds, fails here.
@Suite struct CheckerAgreementTests {
    /// Fixture cases the two judge differently by design, with why.
    static let expectedDifferences: [String: String] = {
        let https = "FCM takes any string here; Herald refuses an image a device cannot load (https:// only)"
        let apple = "an APNs rule FCM passes on unchecked and Apple then refuses; Herald refuses first"
        let size = "Herald measures the payload per platform as delivered (FCM's documented limit); the emulator measures the request"
        return [
            "topic with the /topics/ prefix": "FCM strips the legacy /topics/ prefix; Herald asks for the topic name alone",
            "condition with double quotes": "the emulator also takes double-quoted topic names; Herald's rules only the documented single quotes",
            "condition with !, parentheses and line breaks": "the emulator's condition parser allows only spaces and tabs between tokens",
            "image over http": https, "image URL with a space": https, "image URL without a host": https,
            "android image over ftp": https, "apns image over http": https,
            "priority in lower case": "FCM reads enum names in any case; Herald's rules ask for them as the reference writes them",
            "unknown apns-push-type": apple, "apns-collapse-id over 64 bytes": apple, "badge as text": apple,
            "alert a number": apple, "sound a list": apple, "Live Activity update with a dismissal-date": apple,
            "payload of exactly 4096 bytes": size, "topic payload of exactly 2048 bytes": size, "condition payload over 2048 bytes": size,
            "unknown fields: lowerCamelCase spellings point to the reference names":
                "proto JSON also takes lowerCamelCase names; Herald refuses them so that every rule sees every field",
            "unknown fields: a lowerCamelCase name with a digit points to its snake_case form":
                "proto JSON also takes lowerCamelCase names; Herald refuses them so that every rule sees every field",
            "whole numbers written as 1.0 and 1e3": "the emulator reads an int32 only as plain digits",
        ]
    }()

    struct Verdicts: CustomStringConvertible {
        var name: String
        var clientIssues: [ValidationIssue]
        var checker: Result<ValidatedSend, FieldViolation>
        var clientAccepts: Bool { clientIssues.isEmpty }
        var checkerAccepts: Bool { if case .success = checker { return true } else { return false } }
        var description: String {
            let refusal: String
            switch checker {
            case .success: refusal = "accepted"
            case .failure(let violation): refusal = violation.description
            }
            return "\(name): client \(clientIssues.map(\.description)), checker \(refusal)"
        }
    }

    static func verdicts() throws -> [Verdicts] {
        var cases: [(String, JSONValue)] = []
        for group in ["invalid", "valid"] {
            for c in try FCMFixtures.validationCases(group) where c.extraFields.isEmpty { cases.append((c.name, c.message)) }
        }
        for seed in try FCMFixtures.seeds() { cases.append((seed.source, seed.message)) }
        return cases.map { name, message in
            Verdicts(name: name, clientIssues: MessageValidator.validate(message),
                     checker: RequestChecker.validate(body: ["message": message]))
        }
    }

    @Test func bothAcceptAndRefuseTheSameFixtureMessages() throws {
        let all = try Self.verdicts()
        #expect(all.count > 100)
        var differing: Set<String> = []
        for v in all where v.clientAccepts != v.checkerAccepts {
            differing.insert(v.name)
            if Self.expectedDifferences[v.name] == nil { Issue.record("unexpected difference: \(v)") }
        }
        for name in Self.expectedDifferences.keys where !differing.contains(name) {
            Issue.record("listed as a difference but judged alike now: \(name)")
        }
        // Both sides refuse something, or agreement would prove little.
        #expect(all.filter { !$0.clientAccepts && !$0.checkerAccepts }.count > 30)
    }

    @Test func unknownFieldsAreRefusedByBothAtTheSamePlace() throws {
        for v in try Self.verdicts() where v.clientIssues.contains(where: { $0.rule == "unknown_field" }) {
            guard case .failure(let violation) = v.checker else {
                if Self.expectedDifferences[v.name] == nil { Issue.record("the checker accepted \(v)") }
                continue
            }
            // FCM names the object holding the unknown member; the client names the member.
            #expect(v.clientIssues.contains { $0.field.hasPrefix(violation.field) }, "\(v)")
        }
    }
}
