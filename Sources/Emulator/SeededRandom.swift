/// Deterministic randomness for scenarios: the same seed, token and attempt give the same
/// number whichever thread or order the requests arrive in, so a run repeats.
public enum SeededRandom {
    /// A uniform number in [0, 1).
    public static func unit(seed: UInt64, key: String, attempt: Int, salt: UInt64) -> Double {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        var x = seed ^ hash ^ (UInt64(truncatingIfNeeded: attempt) &* 0x9E37_79B9_7F4A_7C15) ^ (salt &* 0xD1B5_4A32_D192_ED03)
        // splitmix64 finaliser
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31
        return Double(x >> 11) / Double(UInt64(1) << 53)
    }
}
