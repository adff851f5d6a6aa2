import PushCore
import Transport

/// What the fault engine sees of a request.
package struct FaultContext {
    package var provider: PushProvider
    package var token: ArraySlice<UInt8>
    package var topic: ArraySlice<UInt8>?
    package var project: String?
    package var path: ArraySlice<UInt8>
    package var headers: HTTPFields
    /// (fleet id, labels) of a token's device, asked only by rules that need it.
    package var device: (ArraySlice<UInt8>) -> (fleet: String?, labels: [String])

    package init(
        provider: PushProvider, token: ArraySlice<UInt8>, topic: ArraySlice<UInt8>?, project: String?,
        path: ArraySlice<UInt8>, headers: HTTPFields, device: @escaping (ArraySlice<UInt8>) -> (fleet: String?, labels: [String])
    ) {
        self.provider = provider
        self.token = token
        self.topic = topic
        self.project = project
        self.path = path
        self.headers = headers
        self.device = device
    }
}
