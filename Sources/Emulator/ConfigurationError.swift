/// A problem with the configuration, reported as one clear line.
package struct ConfigurationError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}
