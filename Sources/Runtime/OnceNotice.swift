import CSystem
import Synchronization

/// Lines an operator should read once, not once per request: each key is said the first time
/// only (a sender naming a credential the emulator lacks, per key id or account), at most
/// `limit` keys in all, so a sender cycling through made-up names cannot fill memory or stderr.
public final class OnceNotice: Sendable {
    private let said = Mutex<Set<String>>([])
    private let limit: Int
    private let write: @Sendable (String) -> Void

    public init(limit: Int = 1000, write: @escaping @Sendable (String) -> Void = { csys_write_stderr($0) }) {
        self.limit = limit
        self.write = write
    }

    /// Says `line` (built only when it is said) if `key` was not said before; true when it was said.
    @discardableResult
    public func say(_ key: String, _ line: () -> String) -> Bool {
        let first = said.withLock { keys -> Bool in
            guard keys.count < limit, !keys.contains(key) else { return false }
            keys.insert(key)
            return true
        }
        if first { write("pushemu: " + line() + "\n") }
        return first
    }
}
