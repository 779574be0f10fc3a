/// Keeps credentials out of reasons and logs: an answer could echo a request header, and a
/// proxy's error page could quote anything.
enum Redact {
    /// `text` with every string of `also` (those of 6 bytes or more), bearer tokens, Google
    /// access tokens (`ya29.`) and JWTs replaced by `[redacted]`, line breaks and tabs turned
    /// into single spaces, and cut to `limit` characters.
    static func secrets(in text: String, limit: Int, also: [String] = []) -> String {
        var bytes = Array(text.utf8)
        for secret in also where secret.utf8.count >= 6 {
            bytes = replacing(Array(secret.utf8), in: bytes, with: Array("[redacted]".utf8))
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        let marker = Array("[redacted]".utf8)
        func isTokenByte(_ b: UInt8) -> Bool {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                 UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
                return true
            default:
                return false
            }
        }
        func startsWith(_ word: String, at index: Int, ignoringCase: Bool) -> Bool {
            let w = Array(word.utf8)
            guard index + w.count <= bytes.count else { return false }
            for k in 0..<w.count {
                let b = bytes[index + k]
                if ignoringCase ? (b | 0x20) != (w[k] | 0x20) : b != w[k] { return false }
            }
            return true
        }
        func tokenEnd(from index: Int) -> Int {
            var j = index
            while j < bytes.count, isTokenByte(bytes[j]) { j += 1 }
            return j
        }
        while i < bytes.count {
            let atWordStart = i == 0 || !isTokenByte(bytes[i - 1])
            if atWordStart, startsWith("bearer ", at: i, ignoringCase: true) {
                out.append(contentsOf: bytes[i..<(i + 7)])
                var j = i + 7
                while j < bytes.count, bytes[j] == 0x20 { j += 1 }
                let end = tokenEnd(from: j)
                if end > j { out.append(contentsOf: marker) }
                i = end
                continue
            }
            if atWordStart, startsWith("ya29.", at: i, ignoringCase: false) {
                out.append(contentsOf: marker)
                i = tokenEnd(from: i)
                continue
            }
            if atWordStart, startsWith("eyJ", at: i, ignoringCase: false) {
                let end = tokenEnd(from: i)
                if bytes[i..<end].filter({ $0 == UInt8(ascii: ".") }).count >= 2 {
                    out.append(contentsOf: marker)
                    i = end
                    continue
                }
            }
            let b = bytes[i]
            if b == 0x0A || b == 0x0D || b == 0x09 {
                if out.last != 0x20 { out.append(0x20) }
            } else {
                out.append(b)
            }
            i += 1
        }
        return Text.truncate(String(decoding: out, as: UTF8.self), limit: limit, ellipsis: "…")
    }

    static func replacing(_ needle: [UInt8], in haystack: [UInt8], with replacement: [UInt8]) -> [UInt8] {
        guard !needle.isEmpty, haystack.count >= needle.count else { return haystack }
        var out: [UInt8] = []
        out.reserveCapacity(haystack.count)
        var i = 0
        while i < haystack.count {
            if haystack[i] == needle[0], i + needle.count <= haystack.count,
               haystack[i..<(i + needle.count)].elementsEqual(needle) {
                out.append(contentsOf: replacement)
                i += needle.count
            } else {
                out.append(haystack[i])
                i += 1
            }
        }
        return out
    }
}
