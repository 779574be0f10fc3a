import Foundation
import PackagePlugin

/// Turns `migrations/*.sql` at the package root into a Swift source file of the target it serves,
/// so the binary carries its schema and `herald migrate` needs no files beside it.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let directory = context.package.directoryURL.appendingPathComponent("migrations")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { directory.appendingPathComponent($0) }
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) migrations",
                executable: try context.tool(named: "EmbedFiles").url,
                arguments: [output.path, "EmbeddedMigrations", "list"] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
