import Foundation

/// A blocking TCP client for sending exact bytes (malformed HTTP/1.1, split writes) to 127.0.0.1.
public final class RawClient {
    public let fd: Int32

    public init(port: Int, host: String = "127.0.0.1", timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError("socket failed") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TestSupportError("connect to \(host):\(port) failed: errno \(errno)")
        }
    }

    deinit { close(fd) }

    public func send(_ s: String) throws { try send(Array(s.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw TestSupportError("send failed: errno \(errno)") }
            off += n
        }
    }

    /// Half-closes the write side.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads until the peer closes or the receive timeout passes.
    public func readAll() -> String { String(decoding: readAllBytes(), as: UTF8.self) }

    /// The bytes read until the peer closes or the receive timeout passes.
    public func readAllBytes() -> [UInt8] {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return out
    }

    /// Reads until `marker` has been seen `count` times (or timeout/close).
    public func read(until marker: String, count: Int = 1) -> String {
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while String(decoding: out, as: UTF8.self).components(separatedBy: marker).count - 1 < count {
            let n = recv(fd, &buf, buf.count, 0)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// True when the peer closed the connection (recv returns 0) within the timeout.
    public func peerClosed() -> Bool {
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buf, buf.count, 0)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }
}
