import PushCore

/// The export format (`pushemu state export`, `GET /emulator/v1/state`): JSON lines, a header
/// line then one line per record, every store's records in registry order:
///
/// ```
/// {"pushemu":"state","format":1}
/// {"store":"apns.keys","kind":"key","teamId":"ABCDE12345","keyId":"KEY1234567","publicKeyPem":"-----BEGIN..."}
/// {"store":"devices","kind":"fleet","number":1,"platform":"ios","app":"com.example","count":1000,"seed":7,...}
/// ```
///
/// A record's fields are its kind's schema (docs/state.md lists them); absent fields take their
/// defaults, so a hand-written file names only what it needs. The same state always exports to
/// the same bytes: an export imported and exported again is the same file.
public enum StateExport {
    public static let format = 1
    public static let header = "{\"pushemu\":\"state\",\"format\":\(format)}"
    /// The longest line read (a record with thousands of topics or a large stored payload).
    public static let maxLine = 16 << 20

    public struct ImportError: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(_ description: String) { self.description = description }
    }
}

extension StoreRegistry {
    /// Every persistent store's state as export lines (without newlines), header first.
    public func export(_ line: (String) -> Void) throws {
        line(StateExport.header)
        var failure: Error?
        for store in persistentStores {
            store.allRecords { record in
                guard failure == nil else { return }
                do { line(try exportLine(record)) } catch { failure = error }
            }
            if let failure { throw failure }
        }
    }

    /// Every persistent store's state as change records, in registry order (what a cluster node
    /// ships to re-seed a Redis that lost the cluster's stream).
    public func forEachRecord(_ body: (ChangeRecord) -> Void) {
        for store in persistentStores { store.allRecords(body) }
    }

    /// One record as an export line.
    func exportLine(_ record: ChangeRecord) throws -> String {
        guard let schema = schema(store: record.store, kind: record.kind) else {
            throw StateFormatError("store \(record.store) has no record kind \(record.kind)")
        }
        var s = "{\"store\":" + JSONWriter.quote(record.store) + ",\"kind\":" + JSONWriter.quote(schema.name)
        if record.version != 1 { s += ",\"v\":\(record.version)" }
        let members = try RecordJSON.members(record.body, schema.fields)
        if !members.isEmpty { s += "," + members }
        return s + "}"
    }

    /// Reads export lines into records, checking every line (its store, kind, version and
    /// fields) before any is applied. `lineNumber` counts from 1 (the header).
    public func parseExport(_ lines: [ArraySlice<UInt8>]) throws -> [ChangeRecord] {
        var records: [ChangeRecord] = []
        var sawHeader = false
        for (i, raw) in lines.enumerated() {
            let text = raw.last == UInt8(ascii: "\r") ? raw.dropLast() : raw
            if text.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            let n = i + 1
            guard text.count <= StateExport.maxLine else { throw StateExport.ImportError("line \(n) is longer than 16 MiB") }
            let bytes = Array(text)
            let parsed: Result<ChangeRecord?, StateExport.ImportError> = bytes.withUnsafeBytes { b in
                var tokens: [JSONToken] = []
                var limits = JSONLimits()
                limits.maxTokens = 1 << 22
                if let e = JSONParser.parse(b, into: &tokens, limits: limits) {
                    return .failure(StateExport.ImportError("line \(n) is not JSON: \(e)"))
                }
                guard tokens.first?.kind == .object else { return .failure(StateExport.ImportError("line \(n) is not a JSON object")) }
                let v = JSONView(bytes: b, tokens: tokens)
                if !sawHeader {
                    guard let p = v.member(0, "pushemu"), v.tokens[p].kind == .string, v.string(p) == "state" else {
                        return .failure(
                            StateExport.ImportError(
                                "line \(n) is not a pushemu state export's header ({\"pushemu\":\"state\",\"format\":1})"))
                    }
                    guard let f = v.member(0, "format"), let format = v.integer(f), format >= 1 else {
                        return .failure(StateExport.ImportError("the header has no format number"))
                    }
                    guard format <= StateExport.format else {
                        return .failure(
                            StateExport.ImportError(
                                "this export is of state format \(format), newer than this pushemu reads (\(StateExport.format)): import it with a newer pushemu"
                            ))
                    }
                    return .success(nil)
                }
                do {
                    return .success(try record(v, line: n))
                } catch let e as StateExport.ImportError {
                    return .failure(e)
                } catch {
                    return .failure(StateExport.ImportError("line \(n): \(error)"))
                }
            }
            switch parsed {
            case .failure(let e): throw e
            case .success(let r?): records.append(r)
            case .success(nil): sawHeader = true
            }
        }
        guard sawHeader else {
            throw StateExport.ImportError("the file is empty (a state export starts with {\"pushemu\":\"state\",\"format\":1})")
        }
        return records
    }

    private func record(_ v: JSONView, line n: Int) throws -> ChangeRecord {
        guard let s = v.member(0, "store"), v.tokens[s].kind == .string else { throw StateExport.ImportError("line \(n) names no store") }
        let store = v.string(s)
        guard store == StoreRegistry.storeName || persistent[store] != nil else {
            let known = persistentStores.map(\.stateName).joined(separator: ", ")
            throw StateExport.ImportError("line \(n): no store '\(store)' (the stores are \(known))")
        }
        guard let k = v.member(0, "kind"), v.tokens[k].kind == .string else { throw StateExport.ImportError("line \(n) names no kind") }
        let kindName = v.string(k)
        guard let schema = schema(store: store, name: kindName) else {
            throw StateExport.ImportError("line \(n): store \(store) has no record kind '\(kindName)'")
        }
        var version = 1
        if let vv = v.member(0, "v") {
            guard let x = v.integer(vv), x >= 1 else { throw StateExport.ImportError("line \(n): v must be a version number") }
            version = x
        }
        guard version <= schema.version else {
            throw StateExport.ImportError(
                "line \(n): a \(store) \(kindName) record of version \(version), newer than this pushemu reads (\(schema.version))")
        }
        var w = StateWriter()
        do {
            try RecordJSON.write(v, object: 0, schema.fields, into: &w, skip: ["store", "kind", "v"])
        } catch let e as StateFormatError {
            throw StateExport.ImportError("line \(n) (\(store) \(kindName)): \(e.description)")
        }
        return ChangeRecord(store: store, kind: schema.kind, version: version, body: w.bytes)
    }

    /// Applies records read from an export, logging each (so they outlive the process), and
    /// returns how many each store took. Stops at the first record a store refuses.
    public func apply(imported records: [ChangeRecord], log: StateLog?, nowMs: Int64) throws -> [(String, Int)] {
        var counts: [String: Int] = [:]
        var order: [String] = []
        for (i, r) in records.enumerated() {
            do {
                try apply(r)
            } catch {
                throw StateExport.ImportError("record \(i + 1) (\(r.store)): \(error)")
            }
            if let log {
                var logged = r
                logged.atMs = nowMs
                log.append(logged)
            }
            if counts[r.store] == nil { order.append(r.store) }
            counts[r.store, default: 0] += 1
        }
        return order.map { ($0, counts[$0]!) }
    }
}
