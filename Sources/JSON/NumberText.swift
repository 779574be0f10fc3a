import Foundation

/// A number as people write it: a whole one without a point (`500`); any other with `decimals`
/// places (`2.500`), or with nil the shortest text that reads back as the same value (`2.5`).
/// What rates and ages look like in JSON answers and in Prometheus text alike.
public func numberText(_ value: Double, decimals: Int? = nil) -> String {
    if value == value.rounded() && abs(value) < 1e15 { return String(Int(value)) }
    guard let decimals else { return String(value) }
    return String(format: "%.\(decimals)f", value)
}
