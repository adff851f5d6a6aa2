import PushCore
import Tracking

/// What the app on a device declares that a payload's links and sounds must match: its custom
/// URL schemes (`Info.plist` `CFBundleURLSchemes`, Android intent filters) and the sound files in
/// its bundle. `{"urlSchemes": ["myapp"], "sounds": ["chime.caf"]}` on a device or a fleet; an
/// empty list means "none declared", and a field left out means "not known" (its rule stays quiet).
public struct AppProfile: Sendable, Equatable {
    /// Lowercase schemes, without `:`; nil: not known.
    public var urlSchemes: [String]?
    /// Sound file names in the app bundle; nil: not known.
    public var sounds: [String]?

    public init(urlSchemes: [String]? = nil, sounds: [String]? = nil) {
        self.urlSchemes = urlSchemes.map { $0.map { $0.lowercased() } }
        self.sounds = sounds
    }

    public var isEmpty: Bool { urlSchemes == nil && sounds == nil }

    /// The device and fleet fields this reads.
    public static let fields: Set<String> = ["urlSchemes", "sounds"]

    /// Takes `urlSchemes` and `sounds` from `r` (null: not known).
    public mutating func read(_ r: inout JSONObjectReader) throws {
        for name in ["urlSchemes", "sounds"] {
            guard let i = r.value(name) else { continue }
            let v = r.view
            if v.tokens[i].kind == .null {
                if name == "urlSchemes" { urlSchemes = nil } else { sounds = nil }
                continue
            }
            guard v.tokens[i].kind == .array, v.tokens[i].count <= 256 else {
                throw r.failure(name, "must be an array of at most 256 strings")
            }
            var list: [String] = []
            var bad = false
            v.forEachElement(i) { e in
                guard v.tokens[e].kind == .string else {
                    bad = true
                    return
                }
                let s = v.string(e)
                if s.isEmpty || s.utf8.count > 128 { bad = true }
                list.append(s)
            }
            if name == "urlSchemes" {
                guard !bad, list.allSatisfy(AppProfile.isScheme) else {
                    throw r.failure(name, "must be URL schemes (a letter, then letters, digits, + - or .), such as \"myapp\"")
                }
                urlSchemes = list.map { $0.lowercased() }
            } else {
                guard !bad else { throw r.failure(name, "must be file names (1 to 128 bytes), such as \"chime.caf\"") }
                sounds = list
            }
        }
    }

    /// RFC 3986 `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
    static func isScheme(_ s: String) -> Bool {
        guard let first = s.utf8.first, first.isASCIILetter else { return false }
        return s.utf8.allSatisfy { $0.isASCIILetter || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E }
    }

    public var json: String {
        func list(_ l: [String]?) -> String { l.map { "[" + $0.map(JSONWriter.quote).joined(separator: ",") + "]" } ?? "null" }
        return "{\"urlSchemes\":" + list(urlSchemes) + ",\"sounds\":" + list(sounds) + "}"
    }
}

extension UInt8 {
    var isASCIILetter: Bool { (self >= 0x41 && self <= 0x5A) || (self >= 0x61 && self <= 0x7A) }
}
