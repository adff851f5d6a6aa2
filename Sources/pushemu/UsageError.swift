/// A command line that cannot run as given (an unknown option, a missing one, a bad value):
/// the CLI exits 2 for it, as for every usage error, and 1 when a command that could run failed.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
