import Crypto
import Testing

@Suite struct HMACTests {
    func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// RFC 4231, test cases 2 (a short key) and 6 (a key longer than the block, hashed first).
    @Test func rfc4231Vectors() {
        #expect(hex(HMACSHA256.authenticate(Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(hex(HMACSHA256.authenticate(Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                                            key: [UInt8](repeating: 0xaa, count: 131)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test func constantTimeEquality() {
        #expect(ConstantTime.equal(Array("secret".utf8), Array("secret".utf8)))
        #expect(!ConstantTime.equal(Array("secret".utf8), Array("secreT".utf8)))
        #expect(!ConstantTime.equal(Array("secret".utf8), Array("secret!".utf8)))
        #expect(!ConstantTime.equal([], [0]))
        #expect(ConstantTime.equal([], []))
    }
}
