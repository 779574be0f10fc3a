import JSON

/// The plain-text form of a legacy request (docs/legacy.md Table 3)
/// (`application/x-www-form-urlencoded;charset=UTF-8`), read into the JSON payload it stands for
/// (docs/legacy.md 4.9). herald._legacy_form_payload in SQL does the same.
enum LegacyForm {
    static let names = ["registration_id", "collapse_key", "time_to_live", "restricted_package_name", "dry_run"]

    static func reject(_ code: String, _ path: String, _ reason: String) -> LegacyRejection {
        LegacyRejection(code: code, path: path, reason: reason)
    }

    /// The JSON payload of a form body. `registration_id` becomes a one-element
    /// `registration_ids`, so a value starting with `/topics/` stays a token, as docs/legacy.md 4.9 says.
    static func payload(_ body: String) throws(LegacyRejection) -> JSONValue {
        var payload = JSONObject()
        var data = JSONObject()
        var seen: Set<String> = []
        for piece in body.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = piece.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = try decode(parts[0], "legacy")
            let value = try decode(parts.count > 1 ? parts[1] : "", "legacy.\(name)")
            if !seen.insert(name).inserted {
                throw reject("InvalidParameters", "legacy.\(name)", "is given more than once")
            }
            if name.hasPrefix("data.") {
                let key = String(name.dropFirst(5))
                if key.isEmpty { throw reject("InvalidParameters", "legacy.data", "data. needs a key, as in data.score=3x1") }
                data[key] = .string(value)
                continue
            }
            switch name {
            case "registration_id":
                payload["registration_ids"] = [.string(value)]
            case "collapse_key", "restricted_package_name":
                payload[name] = .string(value)
            case "time_to_live":
                guard !value.isEmpty, value.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) }) else {
                    throw reject("InvalidTtl", "legacy.time_to_live", "must be a whole number of seconds from 0 to 2419200 (4 weeks), not \(LegacyTranslator.quote(value))")
                }
                let trimmed = value.drop { $0 == "0" }
                payload[name] = .number(trimmed.isEmpty ? "0" : String(trimmed))
            case "dry_run":
                switch value {
                case "true", "1": payload[name] = true
                case "false", "0": payload[name] = false
                default: throw reject("InvalidParameters", "legacy.dry_run", "must be true, false, 1 or 0, not \(LegacyTranslator.quote(value))")
                }
            default:
                throw reject("InvalidParameters", "legacy.\(name)", "\(LegacyTranslator.quote(name)) is not a plain-text legacy parameter (docs/legacy.md Table 3)")
            }
        }
        guard case .array(let ids)? = payload["registration_ids"], ids.first?.stringValue?.isEmpty == false else {
            throw reject("MissingRegistration", "legacy.registration_id", "a plain-text request needs registration_id")
        }
        if !data.isEmpty { payload["data"] = .object(data) }
        return .object(payload)
    }

    /// Percent-decoding with `+` as a space; the result must be UTF-8.
    static func decode(_ text: Substring, _ path: String) throws(LegacyRejection) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(0x20)
            case UInt8(ascii: "%"):
                guard utf8.count >= 2, let high = hex(utf8[utf8.startIndex]), let low = hex(utf8[utf8.startIndex + 1]) else {
                    throw invalid(path)
                }
                bytes.append(high << 4 | low)
                utf8 = utf8.dropFirst(2)
            default: bytes.append(byte)
            }
        }
        // PostgreSQL text cannot hold NUL, so neither side accepts it.
        guard let decoded = String(validating: bytes, as: UTF8.self), !bytes.contains(0) else { throw invalid(path) }
        return decoded
    }

    static func invalid(_ path: String) -> LegacyRejection {
        reject("InvalidParameters", path, "is not valid percent-encoded UTF-8")
    }

    static func hex(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
