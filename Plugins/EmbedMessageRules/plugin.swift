import Foundation
import PackagePlugin

/// Compiles `Rules/message-rules.json` of the target it serves into a Swift string constant
/// (`EmbeddedMessageRules.text`), so the binary carries the validation rules and both the Swift
/// validator and `herald migrate` (which loads them into PostgreSQL) read the same definition
/// wherever the binary is installed, with no resource bundle beside it.
@main
struct EmbedMessageRules: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        // Target.directoryURL needs tools 6.1; the package declares 6.0, so use the default layout.
        let input = context.package.directoryURL
            .appendingPathComponent("Sources/\(target.name)/Rules/message-rules.json")
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedMessageRules.swift")
        return [
            .buildCommand(
                displayName: "Embedding message rules",
                executable: try context.tool(named: "EmbedFiles").url,
                arguments: [output.path, "EmbeddedMessageRules", "text", input.path],
                inputFiles: [input],
                outputFiles: [output]
            )
        ]
    }
}
