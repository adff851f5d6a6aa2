import CSQLite

/// A thin owner of one SQLite connection and its prepared statements (one thread at a time).
final class SQLiteDatabase {
    let db: OpaquePointer

    struct SQLiteError: Error, CustomStringConvertible {
        let description: String
    }

    /// `vfs`: a registered VFS name (nil: SQLite's default).
    init(path: String, vfs: String? = nil) throws {
        var h: OpaquePointer?
        let rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, vfs)
        guard rc == SQLITE_OK, let h else {
            let msg = h.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let h { sqlite3_close(h) }
            throw SQLiteError(description: "cannot open the journal at \(path): \(msg)")
        }
        db = h
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { sqlite3_close(db) }

    /// The last error's message.
    var message: String { String(cString: sqlite3_errmsg(db)) }

    func exec(_ sql: String) throws {
        var err: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &err) != SQLITE_OK {
            let msg = err.map { String(cString: $0) } ?? "error"
            sqlite3_free(err)
            throw SQLiteError(description: "\(msg) (in \(sql.prefix(60)))")
        }
    }

    func prepare(_ sql: String) throws -> Statement {
        var s: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &s, nil) == SQLITE_OK, let s else {
            throw SQLiteError(description: String(cString: sqlite3_errmsg(db)))
        }
        return Statement(s)
    }

    final class Statement {
        let s: OpaquePointer
        init(_ s: OpaquePointer) { self.s = s }
        deinit { sqlite3_finalize(s) }

        func bind(_ i: Int32, _ v: Int64) { sqlite3_bind_int64(s, i, v) }
        /// Binds bytes without a copy: the caller keeps them alive until the statement is stepped.
        func bind(_ i: Int32, blob: UnsafeRawBufferPointer) {
            _ = pushemu_sqlite3_bind_blob_static(s, i, blob.baseAddress, Int32(blob.count))
        }
        /// An empty blob (not NULL, as a bound empty buffer would be).
        func bindEmptyBlob(_ i: Int32) { sqlite3_bind_zeroblob(s, i, 0) }
        func bind(_ i: Int32, text: String) {
            var t = text
            t.withUTF8 { u in
                u.withMemoryRebound(to: CChar.self) { _ = pushemu_sqlite3_bind_text_transient(s, i, $0.baseAddress, Int32(u.count)) }
            }
        }
        @discardableResult
        func step() -> Int32 { sqlite3_step(s) }
        func reset() {
            sqlite3_reset(s)
            sqlite3_clear_bindings(s)
        }
        func int(_ col: Int32) -> Int64 { sqlite3_column_int64(s, col) }
        func isNull(_ col: Int32) -> Bool { sqlite3_column_type(s, col) == SQLITE_NULL }
        func text(_ col: Int32) -> String {
            guard let p = sqlite3_column_text(s, col) else { return "" }
            return String(cString: p)
        }
        func blob(_ col: Int32) -> [UInt8] {
            let n = Int(sqlite3_column_bytes(s, col))
            guard n > 0, let p = sqlite3_column_blob(s, col) else { return [] }
            return Array(UnsafeRawBufferPointer(start: p, count: n))
        }
    }
}
