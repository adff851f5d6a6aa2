import Glibc

/// The little file I/O the stores need (credentials under `--data-dir`), without Foundation.
public enum Files {
    /// `mkdir -p`; errors are left to the first write.
    public static func makeDirectories(_ path: String) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part + "/"
            mkdir(prefix, 0o755)
        }
    }

    /// `path` from the root (the working directory joined when relative), for messages that
    /// must say where, whatever directory the reader runs in.
    public static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var rest = Substring(path)
        while rest.hasPrefix("./") { rest = rest.dropFirst(2) }
        return rest.isEmpty || rest == "." ? cwd : cwd + "/" + rest
    }

    /// Where temporary files go: `TMPDIR` when set, else `/tmp`.
    public static var temporaryDirectory: String {
        if let t = getenv("TMPDIR"), t.pointee != 0 { return String(cString: t) }
        return "/tmp"
    }

    /// The names in a directory (empty if it cannot be read).
    public static func list(_ path: String) -> [String] {
        guard let d = opendir(path) else { return [] }
        defer { closedir(d) }
        var out: [String] = []
        while let e = readdir(d) {
            // Read the name in place, up to its NUL: the rest of `d_name` is not initialised.
            let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
            let name = String(cString: (UnsafeRawPointer(e) + offset).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { out.append(name) }
        }
        return out
    }

    /// A whole file, or nil when it cannot be read or exceeds `limit` bytes.
    public static func read(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 8192)
        while true {
            let n = fread(&buf, 1, buf.count, f)
            data.append(contentsOf: buf[0..<n])
            if data.count > limit { return nil }
            if n < buf.count { break }
        }
        return ferror(f) == 0 ? data : nil
    }

    public struct WriteError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Writes through a temporary file, fsyncs and renames, so readers never see half a file.
    public static func writeAtomically(_ path: String, _ bytes: [UInt8], mode: mode_t = 0o644) throws {
        let tmp = path + ".tmp"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw WriteError(description: "cannot write \(tmp): \(String(cString: strerror(errno)))") }
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 {
                if errno == EINTR { continue }
                close(fd)
                throw WriteError(description: "cannot write \(tmp)")
            }
            off += n
        }
        fsync(fd)
        close(fd)
        guard rename(tmp, path) == 0 else { throw WriteError(description: "cannot write \(path): \(String(cString: strerror(errno)))") }
    }
}
