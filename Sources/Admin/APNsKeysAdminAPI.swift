import APNs
import PushCore
import Transport

/// `/emulator/v1/apns/keys`: the APNs signing keys provider tokens are checked against.
/// `POST` with nothing generates a key (201 with its private key PEM, for a sender to sign
/// with); with `publicKeyPem`, `teamId` and `keyId` it registers an existing key. `GET` lists
/// them (never a private key).
struct APNsKeysAdminAPI: AdminResource {
    let keys: APNsKeyStore

    func register(_ routes: inout RouterGroup) {
        let api = self
        routes.add(.post, "/apns/keys", maxBodySize: 64 * 1024) { ex in ex.respond(api.createKey(ex.request)) }
        routes.add(.get, "/apns/keys") { ex in
            let scope: Scope?
            do { scope = try Scope.of(ex.request) } catch { return ex.respond(AdminAPI.error(400, "\(error)")) }
            // A team's keys (a project or a label holds none).
            let keys = api.keys.all.filter { key in scope.map { $0 == .team(key.teamID) } ?? true }
            ex.respond(.json(200, JSONObjectWriter.list("keys", keys.map(api.keyJSON))))
        }
    }

    func createKey(_ req: Request) -> Response {
        var teamID: String?
        var keyID: String?
        var pem: String?
        var env: APNsEnvironment?
        var topics: [String]?
        if !req.body.isEmpty {
            do {
                try JSONObjectReader.read(req.body) { r in
                    teamID = try r.string("teamId")
                    keyID = try r.string("keyId")
                    pem = try r.string("publicKeyPem")
                    if let e = try r.string("environment") {
                        guard let known = APNsEnvironment(rawValue: e) else {
                            throw r.failure("environment", "must be sandbox or production")
                        }
                        env = known
                    }
                    topics = try r.strings("topics")
                }
            } catch {
                return AdminAPI.error(400, "\(error)")
            }
        }
        do {
            if let pem {
                guard let teamID, let keyID else { return AdminAPI.error(400, "teamId and keyId are required with publicKeyPem") }
                let e = try keys.register(teamID: teamID, keyID: keyID, publicKeyPEM: pem, environment: env, topics: topics)
                return .json(201, keyJSON(e))
            }
            let (e, privatePEM) = try keys.generate(teamID: teamID, keyID: keyID, environment: env, topics: topics)
            var object = keyObject(e)
            object.add("privateKeyPem", privatePEM)
            return .json(201, object.text)
        } catch {
            return AdminAPI.error(400, "\(error)")
        }
    }

    func keyObject(_ e: APNsKeyStore.Entry) -> JSONObjectWriter {
        var object = JSONObjectWriter()
        object.add("teamId", e.teamID)
        object.add("keyId", e.keyID)
        if let environment = e.environment { object.add("environment", environment.rawValue) }
        if let topics = e.topics { object.add("topics", strings: topics) }
        return object
    }

    func keyJSON(_ e: APNsKeyStore.Entry) -> String {
        keyObject(e).text
    }
}
