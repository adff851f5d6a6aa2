#if FUZZING
    import Glibc

    /// libFuzzer's entry points (built with `-sanitize=fuzzer -DFUZZING`, see `Scripts/fuzz`).
    nonisolated(unsafe) private var selected: FuzzTarget = .http1

    @_cdecl("LLVMFuzzerInitialize")
    public func fuzzInitialize(
        _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
    ) -> Int32 {
        guard let name = getenv("PUSHEMU_FUZZ_TARGET").map({ String(cString: $0) }), let target = FuzzTarget(rawValue: name) else {
            let message = "set PUSHEMU_FUZZ_TARGET to one of: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n"
            _ = message.withCString { write(2, $0, strlen($0)) }
            exit(2)
        }
        selected = target
        return 0
    }

    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        selected.run(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }

    @_silgen_name("LLVMFuzzerRunDriver")
    func runDriver(
        _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// SwiftPM names an executable's entry point after its module: hand it to libFuzzer's driver.
    @_cdecl("pushemu_fuzz_main")
    public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var arguments = argv
        return runDriver(&count, &arguments) { data, size in fuzzOne(data, size) }
    }
#else
    import Foundation

    /// Without libFuzzer: replays files (a corpus, a crash input) through a target.
    /// usage: pushemu-fuzz TARGET FILE|DIR...
    @main
    struct Replay {
        static func main() {
            let args = CommandLine.arguments.dropFirst()
            guard let name = args.first, let target = FuzzTarget(rawValue: name), args.count > 1 else {
                FileHandle.standardError.write(
                    Data("usage: pushemu-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE|DIR...\n".utf8))
                exit(2)
            }
            var count = 0
            for path in args.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("no such file: \(path)\n".utf8))
                    exit(2)
                }
                let files =
                    isDirectory.boolValue
                    ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 } : [path]
                for file in files {
                    guard let data = FileManager.default.contents(atPath: file) else { continue }
                    data.withUnsafeBytes { target.run($0) }
                    count += 1
                }
            }
            print("\(target.rawValue): \(count) inputs replayed")
        }
    }
#endif
