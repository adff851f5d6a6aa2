import Foundation
import PackagePlugin

/// Embeds the dashboard at build time: the files under `Web/` become `WebAssets.swift` in the
/// plugin's work directory, compiled into the target that uses the plugin (Admin). `Web/` is
/// the only copy in the tree; the build reruns the tool when any of its files changes.
@main
struct EmbedWebAssets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let web = context.package.directoryURL.appending(path: "Web")
        var inputs: [URL] = []
        if let walk = FileManager.default.enumerator(at: web, includingPropertiesForKeys: [.isRegularFileKey]) {
            for case let url as URL in walk where (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
                inputs.append(url)
            }
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "WebAssets.swift")
        return [
            .buildCommand(
                displayName: "Embedding the dashboard (Web/)", executable: try context.tool(named: "embed-web").url,
                arguments: [web.path, output.path], inputFiles: inputs.sorted { $0.path < $1.path }, outputFiles: [output])
        ]
    }
}
