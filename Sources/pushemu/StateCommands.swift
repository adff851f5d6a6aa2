import Emulator
import PushCore
import Runtime
import State

/// `pushemu state export` and `pushemu state import`: the state as the Firebase emulators'
/// `--export-on-exit` / `--import` keep it, from a running emulator (`--server`, the admin API's
/// `/emulator/v1/state`) or a stopped one's data directory (read and written as a start would,
/// under the directory's lock: a running emulator's is refused).
enum StateCommands {
    static func export(_ f: [String: String]) throws -> String {
        let text: String
        if let dir = f["data-dir"] {
            let emulator = try Emulator.offline(dataDirectory: dir)
            defer { emulator.stateLog?.release() }
            var out = ""
            try emulator.registry.export { out += $0 + "\n" }
            text = out
        } else {
            let reply = try AdminClient.request("GET", try Commands.server(f) + "/emulator/v1/state")
            guard reply.status == 200 else { throw ConfigurationError("the emulator answered \(reply.status): \(reply.body)") }
            text = reply.body
        }
        guard let path = f["out"] else { return text }
        do {
            try Files.writeAtomically(path, Array(text.utf8))
        } catch {
            throw ConfigurationError("\(error)")
        }
        return "{\"out\":" + JSONWriter.quote(path) + ",\"bytes\":\(text.utf8.count)}\n"
    }

    static func importFile(_ path: String, _ f: [String: String]) throws -> String {
        let bytes = try Emulator.readFile(path, what: "state", limit: 1 << 30)
        let replace = f["replace"] != nil
        guard let dir = f["data-dir"] else {
            let url = try Commands.server(f) + "/emulator/v1/state" + (replace ? "?replace=true" : "")
            return try Commands.call("POST", url, body: String(decoding: bytes, as: UTF8.self))
        }
        let emulator = try Emulator.offline(dataDirectory: dir)
        defer { emulator.stateLog?.release() }
        let registry = emulator.registry
        let records: [ChangeRecord]
        do {
            records = try registry.parseExport(bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false))
        } catch {
            throw ConfigurationError("\(path): \(error)")
        }
        if replace { registry.reset(.state, log: emulator.stateLog, nowMs: Clock.nowMs()) }
        let counts = try registry.apply(imported: records, log: emulator.stateLog, nowMs: Clock.nowMs())
        guard let log = emulator.stateLog, log.write() else { throw ConfigurationError("cannot write the state log in \(dir)/state") }
        // The next start reads one file.
        try log.takeSnapshot()
        var stores = JSONObjectWriter()
        for (name, n) in counts { stores.add(name, n) }
        var out = JSONObjectWriter()
        out.add("imported", records.count)
        out.add("stores", json: stores.text)
        return out.text + "\n"
    }
}
