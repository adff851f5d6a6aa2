import Foundation

/// A provider token the way a user makes one: `pushemu credentials apns` writes a signing key
/// (team TEAM123456, key KEY1234567) to `directory` and registers it in `keyStore`, then
/// `pushemu token apns` signs a JWT with it. The default lenient APNs auth accepts it from any
/// server; a server started on `keyStore` knows the key under `--apns-auth strict` too.
public func makeProviderToken(in directory: String, keyStore: String) throws -> String {
    let credentials = try runCommand(
        ServerProcess.binaryPath,
        [
            "credentials", "apns", "--out", directory, "--data-dir", keyStore, "--team-id", "TEAM123456",
            "--key-id", "KEY1234567",
        ], timeout: 10)
    guard credentials.status == 0 else { throw TestSupportError("pushemu credentials apns: \(credentials.stderr)") }
    let token = try runCommand(
        ServerProcess.binaryPath,
        ["token", "apns", "--key", directory + "/AuthKey_KEY1234567.p8", "--key-id", "KEY1234567", "--team-id", "TEAM123456"],
        timeout: 10)
    guard token.status == 0 else { throw TestSupportError("pushemu token apns: \(token.stderr)") }
    return token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}
