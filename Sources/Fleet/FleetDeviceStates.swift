import PushCore

/// How a fleet's devices start out: the share of them with each notification permission and
/// app state, and with the notification service extension installed. Each field is one value
/// for every member (`"permission": "denied"`) or shares that sum to 1
/// (`"permission": {"authorized": 0.7, "provisional": 0.1, "denied": 0.2}`); `nseInstalled` is
/// a boolean or the share that has it. A member's draw comes from the fleet's seed and its index,
/// so a dry run replays exactly. Defaults: authorized, background, extension installed.
public struct FleetDeviceStates: Sendable, Equatable {
    /// Shares in `SimDevice.Permission.allCases` order.
    public var permission: [Double] = [1, 0, 0]
    /// Shares in `SimDevice.AppState.allCases` order.
    public var appState: [Double] = [0, 1, 0, 0]
    public var nseInstalled = 1.0

    public init() {}

    public static let fields: Set<String> = ["permission", "appState", "nseInstalled"]

    /// Takes the members' start states `r` has (a fleet body's top level, or a saved fleet's).
    public mutating func read(_ r: inout JSONObjectReader) throws {
        if let i = r.value("permission") {
            permission = try FleetDeviceStates.shares(&r, i, "permission", SimDevice.Permission.allCases.map(\.rawValue))
        }
        if let i = r.value("appState") {
            appState = try FleetDeviceStates.shares(&r, i, "appState", SimDevice.AppState.allCases.map(\.rawValue))
        }
        if let i = r.value("nseInstalled") {
            switch r.view.tokens[i].kind {
            case .true: nseInstalled = 1
            case .false: nseInstalled = 0
            default:
                guard let d = r.view.number(i), d >= 0, d <= 1 else {
                    throw r.failure("nseInstalled", "must be a boolean or a share from 0 to 1")
                }
                nseInstalled = d
            }
        }
    }

    /// One name, or `{name: share}` with shares from 0 to 1 that sum to 1.
    static func shares(_ r: inout JSONObjectReader, _ i: Int, _ field: String, _ names: [String]) throws -> [Double] {
        let v = r.view
        let expected = r.failure(field, "must be one of \(names.joined(separator: ", ")), or an object of their shares summing to 1")
        var out = [Double](repeating: 0, count: names.count)
        if v.tokens[i].kind == .string {
            guard let n = names.firstIndex(of: v.string(i)) else { throw expected }
            out[n] = 1
            return out
        }
        guard v.tokens[i].kind == .object else { throw expected }
        var failed = false
        v.forEachMember(i) { k, val in
            guard let n = names.firstIndex(of: v.string(k)), let d = v.number(val), d >= 0, d <= 1 else {
                failed = true
                return
            }
            out[n] = d
        }
        if failed { throw expected }
        guard abs(out.reduce(0, +) - 1) < 1e-6 else { throw r.failure(field, "shares must sum to 1") }
        return out
    }

    /// Member `seed`'s permission, app state and extension.
    func apply(to d: inout SimDevice, seed: UInt64) {
        func draw(_ salt: UInt64) -> Double { Double(FleetTokens.mix(seed ^ salt) >> 11) * (1.0 / 9_007_199_254_740_992.0) }
        func pick(_ shares: [Double], _ salt: UInt64) -> Int {
            let x = draw(salt)
            var acc = 0.0
            for (i, s) in shares.enumerated() {
                acc += s
                if x < acc { return i }
            }
            return shares.lastIndex { $0 > 0 } ?? 0
        }
        d.permission = SimDevice.Permission.allCases[pick(permission, 0x7065_726D)]
        d.appState = SimDevice.AppState.allCases[pick(appState, 0x6170_7073)]
        d.nseInstalled = nseInstalled >= 1 || (nseInstalled > 0 && draw(0x6E73_6569) < nseInstalled)
    }

    var isDefault: Bool { self == FleetDeviceStates() }

    public var json: String {
        func shares(_ s: [Double], _ names: [String]) -> String {
            "{" + zip(names, s).filter { $0.1 > 0 }.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        }
        return "{\"permission\":" + shares(permission, SimDevice.Permission.allCases.map(\.rawValue)) + ",\"appState\":"
            + shares(appState, SimDevice.AppState.allCases.map(\.rawValue)) + ",\"nseInstalled\":\(nseInstalled)}"
    }
}
