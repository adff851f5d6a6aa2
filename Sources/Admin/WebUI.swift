import PushCore
import Transport

/// One dashboard file (see `WebAssets`, generated from `Web/` at build time by the
/// `EmbedWebAssets` plugin).
struct WebAsset: Sendable {
    let path: String
    let contentType: String
    let etag: String
    let text: String
}

/// The dashboard: `GET /` (the page) and `GET /ui/...` (its scripts, styles and icon), on both
/// listeners, from files embedded in the binary. Every answer carries a strict
/// Content-Security-Policy (only this origin's scripts, styles, images and connections; no
/// inline script or style; no framing), `nosniff` and `no-referrer`, and an ETag (a 304 for
/// `if-none-match`). The pages call the admin API, same-origin, so `BrowserGuard` lets them
/// change state while a page on another site cannot.
struct WebUI: AdminResource {
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
        + "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// The answers, made once: path -> (etag, response).
    let files: [String: (etag: String, response: Response)]

    init(assets: [WebAsset] = WebAssets.all) {
        var files: [String: (etag: String, response: Response)] = [:]
        for asset in assets {
            var headers = WebUI.headers()
            headers.add(name: "content-type", value: asset.contentType)
            headers.add(name: "etag", value: asset.etag)
            files[asset.path] = (asset.etag, Response(status: 200, headers: headers, body: Array(asset.text.utf8)))
        }
        self.files = files
    }

    static func headers() -> HTTPFields {
        var h = HTTPFields()
        h.add(name: "content-security-policy", value: contentSecurityPolicy)
        h.add(name: "x-content-type-options", value: "nosniff")
        h.add(name: "referrer-policy", value: "no-referrer")
        h.add(name: "x-frame-options", value: "DENY")
        h.add(name: "cross-origin-opener-policy", value: "same-origin")
        h.add(name: "cross-origin-resource-policy", value: "same-origin")
        h.add(name: "cache-control", value: "no-cache")
        return h
    }

    func answer(_ request: Request, path: String) -> Response {
        guard let file = files[path] else { return AdminAPI.error(404, "no dashboard file \(path)") }
        if let tag = request.headers.first("if-none-match"), tag.utf8String == file.etag {
            var notModified = Response(status: 304, headers: WebUI.headers())
            notModified.headers.add(name: "etag", value: file.etag)
            return notModified
        }
        return file.response
    }

    func register(_ routes: inout RouterGroup) {
        let ui = self
        routes.add([.get, .head], "/", maxBodySize: 0) { ex in ex.respond(ui.answer(ex.request, path: "/ui/index.html")) }
        routes.add([.get, .head], "/ui/*", maxBodySize: 0) { ex in ex.respond(ui.answer(ex.request, path: ex.request.path.utf8String)) }
        // What a browser asks for by itself on any page of this origin (the HTML report too).
        routes.add([.get, .head], "/favicon.ico", maxBodySize: 0) { ex in ex.respond(ui.answer(ex.request, path: "/ui/icon.svg")) }
    }
}
