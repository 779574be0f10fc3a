import Foundation
import PackagePlugin

/// Compiles `Rules/message-rules.json` of the target it serves into a Swift string constant
/// (`EmbeddedMessageRules.text`), so the binary carries the validation rules and both the Swift
/// validator and `herald migrate` (which loads them into PostgreSQL) read the same definition
/// wherever the binary is installed, with no resource bundle beside it. `Rules/apns-rules.json`,
/// where the target has one, becomes `EmbeddedAPNsRules.text` the same way (the APNs message
/// rules, read by `APNsMessageRules` and loaded by `herald migrate` into herald.apns_rules).
@main
struct EmbedMessageRules: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        // Target.directoryURL needs tools 6.1; the package declares 6.0, so use the default layout.
        let input = context.package.directoryURL
            .appendingPathComponent("Sources/\(target.name)/Rules/message-rules.json")
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedMessageRules.swift")
        var commands: [Command] = [
            .buildCommand(
                displayName: "Embedding message rules",
                executable: try context.tool(named: "EmbedFiles").url,
                arguments: [output.path, "EmbeddedMessageRules", "text", input.path],
                inputFiles: [input],
                outputFiles: [output]
            )
        ]
        let apnsInput = context.package.directoryURL
            .appendingPathComponent("Sources/\(target.name)/Rules/apns-rules.json")
        if FileManager.default.fileExists(atPath: apnsInput.path) {
            let apnsOutput = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedAPNsRules.swift")
            commands.append(.buildCommand(
                displayName: "Embedding APNs message rules",
                executable: try context.tool(named: "EmbedFiles").url,
                arguments: [apnsOutput.path, "EmbeddedAPNsRules", "text", apnsInput.path],
                inputFiles: [apnsInput],
                outputFiles: [apnsOutput]
            ))
        }
        return commands
    }
}
