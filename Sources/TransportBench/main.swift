import CSystem
import Glibc
import Transport

/// A trivial 200 responder over the Transport module, for Scripts/bench:
/// `TransportBench HTTP_PORT HTTPS_PORT CERT KEY [THREADS]`. Any POST/GET answers 200 with
/// `apns-id`, as an APNs success would, with no body.
let a = CommandLine.arguments
guard a.count >= 5 else {
    csys_write_stderr("usage: TransportBench HTTP_PORT HTTPS_PORT CERT KEY [THREADS]\n")
    exit(2)
}
func read(_ path: String) -> [UInt8] {
    guard let f = fopen(path, "rb") else {
        csys_write_stderr("cannot read \(path)\n")
        exit(1)
    }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        out.append(contentsOf: buf[0..<n])
        if n < buf.count { break }
    }
    fclose(f)
    return out
}
var config = ServerConfiguration()
config.httpPort = Int(a[1])
config.httpsPort = Int(a[2])
config.tls = TLSConfiguration(certificateChainPEM: read(a[3]), privateKeyPEM: read(a[4]))
config.threads = a.count > 5 ? Int(a[5]) ?? 1 : 1
var router = Router()
// Built once: every answer shares it (copy on write, never written).
let answerHeaders: HTTPFields = {
    var h = HTTPFields()
    h.add(name: "apns-id", value: "00000000-0000-0000-0000-000000000000")
    return h
}()
router.add(nil, "/*") { ex in
    ex.respond(Response(status: 200, headers: answerHeaders))
}
csys_block_signals()
csys_tune_malloc()
_ = csys_raise_nofile_limit()
let server = try HTTPServer(configuration: config, router: router)
try server.start()
csys_write_stdout("listening http=\(server.httpAddress!) https=\(server.httpsAddress!)\n")
_ = csys_wait_signal()
server.shutdown(drainTimeout: 1)
