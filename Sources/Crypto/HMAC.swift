/// HMAC-SHA256 (RFC 2104) over the SHA256 above, and a comparison whose time does not depend on
/// where two secrets first differ.
public enum HMACSHA256 {
    static let blockSize = 64

    public static func authenticate(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        var block = key.count > blockSize ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: blockSize - block.count)
        let inner = SHA256.hash(block.map { $0 ^ 0x36 } + message)
        return SHA256.hash(block.map { $0 ^ 0x5c } + inner)
    }
}

public enum ConstantTime {
    /// True when `a` and `b` hold the same bytes. It reads every byte of both whatever they hold,
    /// so a caller guessing a token learns nothing from how long a wrong guess took; only the
    /// lengths leak, and callers compare fixed-length digests.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        let length = max(a.count, b.count)
        for index in 0..<length {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0 && a.count == b.count
    }
}
