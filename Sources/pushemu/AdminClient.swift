import CCurl
import Emulator
import Tracking

/// A small blocking HTTP client (libcurl easy) for the CLI commands that talk to a running
/// emulator's admin API.
enum AdminClient {
    struct Reply {
        let status: Int
        let body: String
    }

    static func request(_ method: String, _ url: String, body: String? = nil) throws -> Reply {
        CurlGlobal.initialize()
        guard let h = curl_easy_init() else { throw ConfigurationError("libcurl initialisation failed") }
        defer { curl_easy_cleanup(h) }
        final class Sink { var data: [UInt8] = [] }
        let sink = Sink()
        let box = Unmanaged.passRetained(sink)
        defer { box.release() }
        url.withCString { _ = pushemu_curl_setopt_ptr(h, CURLOPT_URL, $0) }
        pushemu_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
        pushemu_curl_setopt_long(h, CURLOPT_TIMEOUT_MS, 120_000)
        method.withCString { _ = pushemu_curl_setopt_ptr(h, CURLOPT_CUSTOMREQUEST, $0) }
        pushemu_curl_setopt_ptr(h, CURLOPT_WRITEDATA, box.toOpaque())
        pushemu_curl_setopt_write(h) { ptr, size, n, user in
            let s = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            let count = size * n
            if let ptr { s.data.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: count)) }
            return count
        }
        var headers: UnsafeMutablePointer<curl_slist>? = nil
        if let body {
            headers = curl_slist_append(headers, "Content-Type: application/json")
            pushemu_curl_setopt_long(h, CURLOPT_POSTFIELDSIZE, body.utf8.count)
            body.withCString { _ = pushemu_curl_setopt_ptr(h, CURLOPT_COPYPOSTFIELDS, $0) }
        }
        pushemu_curl_setopt_ptr(h, CURLOPT_HTTPHEADER, headers)
        defer { curl_slist_free_all(headers) }
        let rc = curl_easy_perform(h)
        guard rc == CURLE_OK else {
            throw ConfigurationError(
                "cannot reach the emulator at \(url): \(String(cString: curl_easy_strerror(rc))) (is it running? point at it with --server URL, or set the PUSHEMU_HOST and PUSHEMU_HTTP_PORT it was started with)"
            )
        }
        var status = 0
        pushemu_curl_getinfo_long(h, CURLINFO_RESPONSE_CODE, &status)
        return Reply(status: status, body: String(decoding: sink.data, as: UTF8.self))
    }
}
