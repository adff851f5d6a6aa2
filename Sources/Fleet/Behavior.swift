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

    /// The behaviour fields (also accepted at a fleet's top level).
    public static let fields: Set<String> = ["openRate", "uninstalledRate", "receiveDelayMs", "openDelayMs"]

    /// `behavior` as an object of its own.
    public static func parse(_ v: JSONView, _ obj: Int) throws -> Behavior {
        var r = try JSONObjectReader(v, obj, path: "behavior.", what: "behavior must be an object")
        var b = Behavior()
        try b.read(&r)
        try r.finish()
        return b
    }

    /// Takes the behaviour fields `r` has (a `behavior` object's, or a fleet body's top level).
    public mutating func read(_ r: inout JSONObjectReader) throws {
        if let x = try r.double("openRate", in: 0...1) { openRate = x }
        if let x = try r.double("uninstalledRate", in: 0...1) { uninstalledRate = x }
        if let d = try Behavior.delay(&r, "receiveDelayMs") { receiveDelayMs = d }
        if let d = try Behavior.delay(&r, "openDelayMs") { openDelayMs = d }
    }

    /// Milliseconds, or `[MIN, MAX]`, at most a day.
    static func delay(_ r: inout JSONObjectReader, _ name: String) throws -> DelayRange? {
        guard let i = r.value(name) else { return nil }
        let v = r.view
        if let n = v.integer(i), n >= 0, n <= 86_400_000 { return DelayRange(Int64(n), Int64(n)) }
        if v.tokens[i].kind == .array, v.tokens[i].count == 2 {
            var vals: [Int] = []
            v.forEachElement(i) { if let n = v.integer($0) { vals.append(n) } }
            if vals.count == 2, vals[0] >= 0, vals[1] >= vals[0], vals[1] <= 86_400_000 {
                return DelayRange(Int64(vals[0]), Int64(vals[1]))
            }
        }
        throw r.failure(name, "must be milliseconds or [MIN, MAX] (at most a day)")
    }

    public var json: String {
        "{\"openRate\":\(openRate),\"receiveDelayMs\":\(receiveDelayMs.json),\"openDelayMs\":\(openDelayMs.json),\"uninstalledRate\":\(uninstalledRate)}"
    }
}
