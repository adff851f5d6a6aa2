import Runtime
import Synchronization
import Transport

/// A push gateway's identity: a fixed small number and a name.
///
/// The number is the provider's index in every per-provider array (metrics, fault indexes,
/// connection-state slots) and the byte the notification log and the journal store for it, so it
/// never changes once a gateway has shipped: APNs is 0 and FCM is 1 on disk in every journal
/// ever written. The name is what the admin API, metrics labels and fault rules use
/// (`"provider":"apns"`).
///
/// Built-in gateways are `apns`, `fcm` and `webpush`. Another gateway picks an unused index below
/// `capacity` and calls `register` once, before any server starts (a test's toy gateway does).
public struct PushProvider: Hashable, Sendable, CustomStringConvertible {
    /// The fixed number (array index; the stored byte).
    public let index: Int
    /// The name in the admin API, metrics and fault rules.
    public let name: String

    /// How many gateways one process can hold (the size of every per-provider array).
    public static let capacity = 4

    public static let apns = PushProvider(index: 0, name: "apns")
    public static let fcm = PushProvider(index: 1, name: "fcm")
    /// Web Push (the push services of Chrome, Firefox, Safari and Edge).
    public static let webpush = PushProvider(index: 2, name: "webpush")

    /// A provider identity; `index` must be below `capacity`.
    public init(index: Int, name: String) {
        precondition(index >= 0 && index < PushProvider.capacity, "a provider index is 0..<\(PushProvider.capacity)")
        self.index = index
        self.name = name
    }

    public var description: String { name }

    public static func == (lhs: PushProvider, rhs: PushProvider) -> Bool { lhs.index == rhs.index }
    public func hash(into hasher: inout Hasher) { hasher.combine(index) }

    private static let registered = FutexLock<[PushProvider?]>(
        [PushProvider.apns, PushProvider.fcm, PushProvider.webpush] + Array(repeating: nil, count: capacity - 3))

    /// Makes a gateway's provider known by name and index (`named`, `stored`).
    public static func register(_ provider: PushProvider) {
        registered.withLock { $0[provider.index] = provider }
    }

    /// Every registered provider, by index.
    public static var all: [PushProvider] { registered.withLock { $0.compactMap { $0 } } }

    /// The registered provider with this name (`"apns"`, `"fcm"`), or nil.
    public static func named(_ name: String) -> PushProvider? {
        if name == "apns" { return .apns }
        if name == "fcm" { return .fcm }
        return registered.withLock { list in list.first { $0?.name == name } ?? nil }
    }

    /// The provider a stored byte stands for (the notification log's and the journal's); an
    /// unknown byte reads as FCM, as every non-zero byte did before there were more than two.
    public static func stored(_ byte: UInt8) -> PushProvider {
        switch byte {
        case 0: return .apns
        case 1: return .fcm
        default:
            let index = Int(byte)
            guard index < capacity else { return .fcm }
            return registered.withLock { $0[index] } ?? .fcm
        }
    }

    /// The platform a report counts its pushes under: `ios` for APNs, `web` for Web Push,
    /// `android` for FCM (and any other).
    public var platformName: String { self == .apns ? "ios" : self == .webpush ? "web" : "android" }

    /// Whether an answer's status accepted the push: 200 for APNs and FCM, 201 for Web Push.
    @inlinable public static func accepts(_ status: Int) -> Bool { status >= 200 && status < 300 }

    /// The byte stored for this provider.
    public var storedByte: UInt8 { UInt8(index) }

    /// The names of the registered providers, for error messages (`apns or fcm`).
    public static var namesForMessages: String {
        let names = all.map(\.name)
        return names.count <= 1 ? names.joined() : names.dropLast().joined(separator: ", ") + " or " + names.last!
    }
}
