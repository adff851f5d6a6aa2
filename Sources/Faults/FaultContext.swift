import PushCore
import Transport

/// What the fault engine sees of a request.
public struct FaultContext {
    public var provider: PushProvider
    public var token: ArraySlice<UInt8>
    public var topic: ArraySlice<UInt8>?
    public var project: String?
    public var path: ArraySlice<UInt8>
    /// What the route is (a rule's `"route"`).
    public var route: RouteKind
    public var headers: HTTPFields
    /// (fleet id, labels) of a token's device, asked only by rules that need it.
    public var device: (ArraySlice<UInt8>) -> (fleet: String?, labels: [String])
    /// The APNs team whose credentials sent it (nil for other providers, or unauthenticated).
    public var team: TeamID?

    public init(
        provider: PushProvider, token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, project: String?,
        path: ArraySlice<UInt8>, route: RouteKind = .send, headers: HTTPFields,
        device: @escaping (ArraySlice<UInt8>) -> (fleet: String?, labels: [String]), team: TeamID? = nil
    ) {
        self.team = team
        self.route = route
        self.provider = provider
        self.token = token
        self.topic = topic
        self.project = project
        self.path = path
        self.headers = headers
        self.device = device
    }
}
