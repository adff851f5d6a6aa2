import Transport

/// `GET /emulator/v1/ca.pem`: the development CA that signed this server's TLS certificate,
/// for a sender's trust store (404 when the server has none: `--tls-cert` given, or no TLS).
struct DevelopmentCAAdminAPI: AdminResource {
    /// The CA, PEM (empty: none).
    let pem: String

    func register(_ routes: inout RouterGroup) {
        let ca = pem
        routes.add(.get, "/ca.pem", maxBodySize: 0) { ex in
            var h = HTTPFields()
            h.add(name: "content-type", value: "application/x-pem-file")
            h.add(name: "content-disposition", value: "attachment; filename=\"pushemu-development-ca.pem\"")
            ex.respond(
                ca.isEmpty
                    ? AdminAPI.error(404, "this server has no development CA") : Response(status: 200, headers: h, body: Array(ca.utf8)))
        }
    }
}
