import FCM
import PushCore
import Runtime
import Transport

/// `/emulator/v1/fcm/service-accounts`: the service accounts whose OAuth assertions the token
/// endpoint accepts. `POST {"projectId"}` generates one (201 with the complete key file,
/// `token_uri` pointing at this emulator; the RSA key is made on the slow-work thread, about
/// 180 ms); adding `clientEmail`, `privateKeyId` and `publicKeyPem` registers an existing one.
/// `GET` lists them (never a private key).
struct FCMServiceAccountsAdminAPI: AdminResource {
    let fcmAccounts: FCMServiceAccounts
    /// Key generation: too slow for an event loop.
    let slowWork: BackgroundWorker

    func register(_ routes: inout RouterGroup) {
        let api = self
        routes.add(.post, "/fcm/service-accounts", maxBodySize: 64 * 1024) { ex in
            // What the answer needs is read here, on the loop; the key is made on the slow-work thread.
            let body = ex.request.body
            let scheme = ex.connection.transport == .tls ? "https" : "http"
            let host = ex.request.authority.map { String(decoding: $0, as: UTF8.self) } ?? "127.0.0.1:\(ex.connection.localPort)"
            let accepted = api.slowWork.submit { ex.respond(api.createServiceAccount(body, tokenURI: "\(scheme)://\(host)/token")) }
            if !accepted { ex.respond(AdminAPI.busy(api.slowWork, "key generations")) }
        }
        routes.add(.get, "/fcm/service-accounts") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            // A project's accounts (a team or a label holds none).
            let accounts = api.fcmAccounts.all.filter { a in scope.map { $0 == .project(a.projectID) } ?? true }
            ex.respond(.json(200, JSONObjectWriter.list("serviceAccounts", accounts.map(FCMServiceAccountsAdminAPI.serviceAccountJSON))))
        }
    }

    /// `{"projectId": P}` generates an account; adding `clientEmail`, `privateKeyId` and
    /// `publicKeyPem` registers an existing one. Answers 201 with the service-account JSON
    /// (for a generated account, the complete key file, `token_uri` pointing at this emulator).
    /// `POST /emulator/v1/fcm/service-accounts` (run on the slow-work thread: it reads only its arguments).
    func createServiceAccount(_ body: [UInt8], tokenURI: String) -> Response {
        var fields: [String: String] = [:]
        do {
            try JSONObjectReader.read(body, example: #"{"projectId":"my-project"}"#) { r in
                fields["projectId"] = try r.string("projectId", required: true)
                for name in ["clientEmail", "privateKeyId", "publicKeyPem"] { fields[name] = try r.string(name) }
            }
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
        guard let project = fields["projectId"] else { return AdminAPI.error(400, "projectId is required") }
        do {
            if let pem = fields["publicKeyPem"] {
                guard let email = fields["clientEmail"], let kid = fields["privateKeyId"] else {
                    return AdminAPI.error(400, "clientEmail and privateKeyId are required with publicKeyPem")
                }
                let a = try fcmAccounts.register(projectID: project, clientEmail: email, privateKeyID: kid, publicKeyPEM: pem)
                return .json(201, FCMServiceAccounts.accountJSON(a))
            }
            if fields["clientEmail"] != nil || fields["privateKeyId"] != nil {
                return AdminAPI.error(400, "clientEmail and privateKeyId are only accepted with publicKeyPem")
            }
            let (_, json) = try fcmAccounts.generate(projectID: project, tokenURI: tokenURI)
            return .json(201, json)
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
    }

    /// An FCM service account as `GET /emulator/v1/fcm/service-accounts` lists it.
    static func serviceAccountJSON(_ account: FCMServiceAccounts.Account) -> String {
        var object = JSONObjectWriter()
        object.add("projectId", account.projectID)
        object.add("projectNumber", String(account.projectNumber))
        object.add("clientEmail", account.clientEmail)
        object.add("clientId", String(account.clientID))
        object.add("privateKeyId", account.privateKeyID)
        return object.text
    }
}
