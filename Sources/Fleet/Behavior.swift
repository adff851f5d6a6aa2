import PushCore

/// A delay: fixed, or uniform in [min, max] milliseconds.
public struct DelayRange: Sendable, Equatable {
    public var min: Int64
    public var max: Int64
    public init(_ min: Int64, _ max: Int64) {
        self.min = min
        self.max = Swift.max(min, max)
    }
    public static let zero = DelayRange(0, 0)

    public func draw(_ r: inout FastRandom) -> Int64 {
        max > min ? min + Int64(r.next(below: UInt64(max - min + 1))) : min
    }

    var json: String { min == max ? String(min) : "[\(min),\(max)]" }
}

/// How a simulated user and app behave: `{"openRate": 0..1, "receiveDelayMs": N or [MIN, MAX],
/// "openDelayMs": N or [MIN, MAX], "uninstalledRate": 0..1 (fleets)}`. Draws come from a
/// generator seeded per device and notification, so a run replays exactly.
public struct Behavior: Sendable, Equatable {
    public var openRate = 0.0
    public var receiveDelayMs = DelayRange.zero
    public var openDelayMs = DelayRange(1000, 5000)
    public var uninstalledRate = 0.0

    public init() {}

    public struct BehaviorError: Error, CustomStringConvertible { public let description: String }

    /// The behaviour fields (also accepted at a fleet's top level).
    public static let fields: Set<String> = ["openRate", "uninstalledRate", "receiveDelayMs", "openDelayMs"]

    public static func parse(_ v: JSONView, _ obj: Int) throws -> Behavior {
        guard v.tokens[obj].kind == .object else { throw BehaviorError(description: "behavior must be an object") }
        var b = Behavior()
        var failure: Error?
        v.forEachMember(obj) { k, val in
            guard failure == nil else { return }
            do { try b.set(v, key: k, value: val) } catch { failure = error }
        }
        if let failure { throw failure }
        return b
    }

    /// Sets one field from a JSON member (`key`, `value`: token indexes of `v`).
    public mutating func set(_ v: JSONView, key k: Int, value val: Int) throws {
        var b = self
        var err: String?
        func rate(_ i: Int, _ name: String) -> Double? {
            guard let d = v.number(i), d >= 0, d <= 1 else {
                err = "behavior.\(name) must be a number from 0 to 1"
                return nil
            }
            return d
        }
        func delay(_ i: Int, _ name: String) -> DelayRange? {
            if let n = v.integer(i), n >= 0, n <= 86_400_000 { return DelayRange(Int64(n), Int64(n)) }
            if v.tokens[i].kind == .array, v.tokens[i].count == 2 {
                var vals: [Int] = []
                v.forEachElement(i) { if let n = v.integer($0) { vals.append(n) } }
                if vals.count == 2, vals[0] >= 0, vals[1] >= vals[0], vals[1] <= 86_400_000 {
                    return DelayRange(Int64(vals[0]), Int64(vals[1]))
                }
            }
            err = "behavior.\(name) must be milliseconds or [MIN, MAX] (at most a day)"
            return nil
        }
        switch v.string(k) {
        case "openRate": if let r = rate(val, "openRate") { b.openRate = r }
        case "uninstalledRate": if let r = rate(val, "uninstalledRate") { b.uninstalledRate = r }
        case "receiveDelayMs": if let d = delay(val, "receiveDelayMs") { b.receiveDelayMs = d }
        case "openDelayMs": if let d = delay(val, "openDelayMs") { b.openDelayMs = d }
        default: err = "unknown behavior field \(v.string(k))"
        }
        if let err { throw BehaviorError(description: err) }
        self = b
    }

    public var json: String {
        "{\"openRate\":\(openRate),\"receiveDelayMs\":\(receiveDelayMs.json),\"openDelayMs\":\(openDelayMs.json),\"uninstalledRate\":\(uninstalledRate)}"
    }
}
