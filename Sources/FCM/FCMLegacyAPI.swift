import PushCore
import Transport

/// The legacy FCM HTTP API (`POST /fcm/send`), shut down from 2024-07-22: it still answers, in
/// its own envelope, but every target fails with `DeprecatedApi` (a sender still on it sees this
/// in production: jlcvp/fcm-node#100, September 2024). So a CI run fails the way production
/// does, instead of passing on a 404 a retrying sender may ignore.
///
/// JSON bodies (`{"to": ..., "registration_ids": [...]}`) get the JSON envelope, one result per
/// target; form bodies (`registration_id=...`) get the plain-text form, `Error=DeprecatedApi`.
public enum FCMLegacyAPI {
    public static func send(_ request: Request) -> Response {
        let contentType = request.headers.firstString("content-type")?.lowercased() ?? ""
        if contentType.hasPrefix("application/x-www-form-urlencoded") || contentType.hasPrefix("text/plain") {
            var h = HTTPFields()
            h.add(name: "content-type", value: "text/plain; charset=UTF-8")
            return Response(status: 200, headers: h, body: Array("Error=DeprecatedApi\n".utf8))
        }
        var targets = 1
        request.body.withUnsafeBytes { raw in
            var tokens: [JSONToken] = []
            guard !raw.isEmpty, JSONParser.parse(raw, into: &tokens) == nil, tokens.first?.kind == .object else { return }
            let v = JSONView(bytes: raw, tokens: tokens)
            if let ids = v.member(0, "registration_ids"), v.tokens[ids].kind == .array {
                targets = max(1, min(1000, Int(v.tokens[ids].count)))
            }
        }
        var random = FastRandom()
        let multicast = random.next() >> 1
        let results = [String](repeating: "{\"error\":\"DeprecatedApi\"}", count: targets).joined(separator: ",")
        let body = "{\"multicast_id\":\(multicast),\"success\":0,\"failure\":\(targets),\"canonical_ids\":0,\"results\":[\(results)]}"
        return FCMResponses.json(200, Array(body.utf8))
    }
}
