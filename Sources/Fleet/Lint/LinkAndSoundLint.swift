import PushCore
import Tracking

/// The rules every SDK shares: the link its tap opens, and an iOS custom sound.
///
/// - `link.invalid`: not an absolute URL (no scheme, or `http(s)` without a host): the tap opens nothing.
/// - `link.not-https`: an `http` link. Universal links (iOS) and verified App Links (Android)
///   are `https` only; an `http` link opens the browser, never the app.
/// - `link.scheme-not-declared`: a custom scheme the app does not declare (when its
///   `urlSchemes` are known): no app handles it, the tap does nothing.
/// - `sound.format`: an iOS custom sound that is not `aiff`, `wav` or `caf`: iOS plays the default sound.
/// - `sound.not-bundled`: a sound not in the app's bundle (when its `sounds` are known): the default plays.
enum LinkAndSoundLint {
    /// Schemes the operating systems handle themselves.
    static let systemSchemes: Set<String> = [
        "mailto", "tel", "sms", "facetime", "facetime-audio", "maps", "geo", "market", "itms-apps", "intent",
    ]
    static let soundExtensions: Set<String> = ["caf", "aif", "aiff", "wav"]

    static func check(_ p: LintInput, links: [String], _ out: inout [LintFinding]) {
        for key in links {
            guard let link = p.app(key) else { continue }
            checkLink(link.value, path: link.path, p, &out)
        }
        if p.ios { checkSound(p, &out) }
    }

    static func checkLink(_ link: String, path: String, _ p: LintInput, _ out: inout [LintFinding]) {
        let bytes = Array(link.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon > 0,
            AppProfile.isScheme(String(decoding: bytes[..<colon], as: UTF8.self))
        else {
            out.append(
                LintFinding(
                    "link.invalid", .warning, "'\(link)' is not an absolute URL (it has no scheme): the tap opens nothing", path: path))
            return
        }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        let rest = bytes[(colon + 1)...]
        if scheme == "http" || scheme == "https" {
            let hasHost = rest.starts(with: [0x2F, 0x2F]) && rest.count > 2 && rest[rest.startIndex + 2] != 0x2F
            guard hasHost else {
                out.append(LintFinding("link.invalid", .warning, "'\(link)' has no host: the tap opens nothing", path: path))
                return
            }
            if scheme == "http" {
                out.append(
                    LintFinding(
                        "link.not-https", .warning,
                        "'\(link)' is http: universal links and App Links are https only, so this opens the browser, not the app",
                        path: path))
            }
            return
        }
        guard !systemSchemes.contains(scheme), let declared = p.profile?.urlSchemes, !declared.contains(scheme) else { return }
        let list = declared.isEmpty ? "none" : declared.joined(separator: ", ")
        out.append(
            LintFinding(
                "link.scheme-not-declared", .error,
                "the app does not declare the URL scheme '\(scheme)' (it declares \(list)): no app opens '\(link)'", path: path))
    }

    static func checkSound(_ p: LintInput, _ out: inout [LintFinding]) {
        let path: String
        let name: String
        // No `aps.sound` (absent or null): no `aps.sound.name` either, and one lookup is enough.
        guard let sound = p.payload.value("aps.sound") else { return }
        if !LintText.isObject(sound) {
            (name, path) = (sound, "aps.sound")
        } else if let s = p.payload.value("aps.sound.name") {
            (name, path) = (s, "aps.sound.name")
        } else {
            return
        }
        guard name != "default", !name.isEmpty else { return }
        let ext = name.split(separator: ".", omittingEmptySubsequences: false).last.map { $0.lowercased() } ?? ""
        if !name.contains(".") || !soundExtensions.contains(ext) {
            out.append(
                LintFinding(
                    "sound.format", .warning,
                    "'\(name)' is not an aiff, wav or caf file: iOS plays only those as custom sounds, and plays the default sound instead",
                    path: path))
        }
        if let bundled = p.profile?.sounds, !bundled.contains(name) {
            out.append(
                LintFinding("sound.not-bundled", .warning, "'\(name)' is not in the app bundle: iOS plays the default sound", path: path))
        }
    }
}
