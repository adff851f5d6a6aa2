import CSystem
import Emulator
import Glibc

/// The thin CLI: parse, start, print the listening line, wait for a signal, drain, exit.

func fail(_ message: String, code: Int32 = 2) -> Never {
    csys_write_stderr("pushemu: \(message)\n")
    exit(code)
}

// The Swift runtime reads the command line from /proc/self/cmdline when linked statically: with
// no /proc (a bare chroot) there is none, and serving on defaults would ignore every flag given.
guard !CommandLine.arguments.isEmpty else { fail("cannot read the command line: is /proc mounted?") }
var args = Array(CommandLine.arguments.dropFirst())
let namedServe = args.first == "serve"
if namedServe { args.removeFirst() }
// A misspelt PUSHEMU_ variable would be ignored silently: say so (serve and every command read them).
let environment = ServeOptions.processEnvironment()
for warning in ServeOptions.unknownVariableWarnings(environment) { csys_write_stderr("pushemu: \(warning)\n") }

// Exit codes: 0 done, 1 a command that could run failed, 2 a command line that cannot run.
if let first = args.first, CommandSpec.all.contains(where: { $0.words.first == first }) {
    do {
        csys_write_stdout(try Commands.run(args))
        exit(0)
    } catch let error as UsageError {
        fail(error.description, code: 2)
    } catch {
        fail("\(error)", code: 1)
    }
}
if args.contains("--help") || args.contains("-h") || args.first == "help" {
    // `pushemu serve --help`: serve's own usage and options; `pushemu --help`: every command.
    csys_write_stdout(
        namedServe ? "usage: pushemu serve [options]\n\nStarts the emulator.\n\n" + ServeOptions.optionsHelp : CommandSpec.overview)
    exit(0)
}
if args.contains("--version") || args.first == "version" {
    let commit = String(cString: csys_build_commit())
    let built = commit.isEmpty ? "commit unknown: not built by Scripts/package" : "commit " + commit
    csys_write_stdout("pushemu \(ServeOptions.version) (\(built))\n")
    exit(0)
}
if let first = args.first, !first.hasPrefix("-") {
    fail(Commands.unknownCommand(first))
}

if args.contains("--print-config") {
    do {
        csys_write_stdout(try ServeOptions.printConfig(args, environment: environment))
        exit(0)
    } catch {
        fail("\(error)")
    }
}
var configuration: EmulatorConfiguration
do {
    configuration = try ServeOptions.parse(args, environment: environment)
} catch {
    fail("\(error)")
}

// Signals are taken synchronously by this thread; every loop thread inherits the mask.
csys_block_signals()
csys_tune_malloc()
// As many descriptors as allowed; connections lowered to fit what that is.
if let warning = configuration.fitOpenFileLimit(Int(csys_raise_nofile_limit())) { csys_write_stderr("pushemu: \(warning)\n") }

let emulator: Emulator
do {
    emulator = try Emulator(configuration: configuration)
    try emulator.start()
} catch {
    fail("\(error)", code: 1)
}

csys_write_stdout(emulator.listeningLine + "\n")

let signal = csys_wait_signal()
csys_write_stderr("pushemu: signal \(signal), draining (up to \(configuration.drainTimeout)s)\n")
emulator.shutdown()
exit(0)
