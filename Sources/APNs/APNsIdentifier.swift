import Crypto

/// `apns-id` values: a canonical UUID (8-4-4-4-12 lowercase hex digits).
public enum APNsIdentifier {
    /// The `apns-id` of a job: the same for every attempt of it, so the requests a retry repeats
    /// can be told apart from new ones at Apple's side and in the emulator. Made from a digest of
    /// the job's ID laid out as an RFC 9562 version 8 (custom) UUID.
    public static func forJob(_ jobID: Int64) -> String {
        // The digest of `herald-apns-job:<ID in decimal>`, written without an interpolated String.
        var input = jobPrefix
        input.append(contentsOf: String(jobID).utf8)
        var bytes = SHA256.hash(input)
        bytes[6] = (bytes[6] & 0x0F) | 0x80   // version 8
        bytes[8] = (bytes[8] & 0x3F) | 0x80   // RFC variant
        return format(bytes[..<16])
    }

    private static let jobPrefix = Array("herald-apns-job:".utf8)

    /// A fresh random UUID (version 4), as APNs makes one when a request carries none.
    public static func random() -> String {
        var bytes = Random.bytes(16)
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return format(bytes)
    }

    /// Whether `text` is a UUID in canonical form (hex digits of either case, dashes at 8, 13, 18, 23).
    public static func isCanonical(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else if !isHexDigit(byte) {
                return false
            }
        }
        return true
    }

    /// The first 16 of `bytes` as 8-4-4-4-12 lowercase hex digits, written straight into the String.
    static func format(_ bytes: some Collection<UInt8>) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for (index, byte) in bytes.prefix(16).enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                out[position] = hexDigit(byte >> 4)
                out[position + 1] = hexDigit(byte & 0x0F)
                position += 2
            }
            return position
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? 0x30 + value : 0x57 + value }
}

func isHexDigit(_ byte: UInt8) -> Bool {
    (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) || (byte >= 0x41 && byte <= 0x46)
}
