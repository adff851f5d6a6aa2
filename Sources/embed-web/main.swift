import Foundation

// The dashboard's files as Swift: one raw string literal per file under `Web/`, with its
// content type and an ETag (a hash of its text). Run by the EmbedWebAssets build plugin.
//
// usage: embed-web WEB_DIRECTORY OUTPUT_FILE

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: embed-web WEB_DIRECTORY OUTPUT_FILE\n".utf8))
    exit(2)
}
let web = URL(fileURLWithPath: arguments[1])
let output = URL(fileURLWithPath: arguments[2])
let types = [
    "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
    "svg": "image/svg+xml",
]
let delimiter = "####"

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-web: \(message)\n".utf8))
    exit(1)
}

/// FNV-1a over the bytes, twice (two seeds): 32 hex digits that change with the text.
func etag(_ text: String) -> String {
    var a: UInt64 = 0xcbf2_9ce4_8422_2325
    var b: UInt64 = 0x84222325_cbf29ce4
    for byte in text.utf8 {
        a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 &+ 1
    }
    return String(format: "%016llx%04llx", a, b >> 48)
}

var files: [(relative: String, url: URL)] = []
guard let walk = FileManager.default.enumerator(at: web, includingPropertiesForKeys: [.isRegularFileKey]) else {
    fail("cannot read \(web.path)")
}
for case let url as URL in walk where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
    let relative = String(url.standardizedFileURL.path.dropFirst(web.standardizedFileURL.path.count)).trimmingCharacters(
        in: CharacterSet(charactersIn: "/"))
    files.append((relative, url))
}
files.sort { $0.relative < $1.relative }

var out = [
    "// Generated at build time by the EmbedWebAssets plugin from Web/: do not edit.",
    "",
    "/// The dashboard's files, served under `/ui/` (and `index.html` at `/`) by `WebUI`.",
    "enum WebAssets {",
    "    static let all: [WebAsset] = [",
]
for file in files {
    guard let type = types[file.url.pathExtension] else { fail("\(file.url.path): no content type for .\(file.url.pathExtension)") }
    guard let text = try? String(contentsOf: file.url, encoding: .utf8) else { fail("cannot read \(file.url.path)") }
    if text.contains("\"" + delimiter) || text.contains("\\" + delimiter) || text.contains("\r") {
        fail("\(file.url.path) holds the raw-string delimiter or a CR")
    }
    var body = text
    while body.hasSuffix("\n") { body.removeLast() }
    out.append(
        "        WebAsset(path: \"/ui/\(file.relative)\", contentType: \"\(type)\", etag: \"\\\"\(etag(text))\\\"\", text: \(delimiter)\"\"\""
    )
    out.append(body)
    out.append("\"\"\"\(delimiter)),")
}
out += ["    ]", "}", ""]
let generated = out.joined(separator: "\n")
if (try? String(contentsOf: output, encoding: .utf8)) != generated {
    do { try generated.write(to: output, atomically: true, encoding: .utf8) } catch { fail("cannot write \(output.path): \(error)") }
}
