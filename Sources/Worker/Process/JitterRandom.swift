/// The random numbers behind retry jitter and spread pauses: SplitMix64, seeded once from the
/// system's generator. Jitter needs spread, not secrecy, and the sender draws one number per
/// outcome; `SystemRandomNumberGenerator` makes a `getrandom` system call for each.
struct JitterRandom: RandomNumberGenerator {
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
