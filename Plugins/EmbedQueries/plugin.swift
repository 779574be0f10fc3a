import Foundation
import PackagePlugin

/// Turns the target's `SQL/*.sql` files (one named statement each) into a Swift source file with
/// one string constant per file, so SQL lives in .sql files and a missing one fails the build.
@main
struct EmbedQueries: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        // Target.directoryURL needs tools 6.1; the package declares 6.0, so use the default layout.
        let directory = context.package.directoryURL.appendingPathComponent("Sources/\(target.name)/SQL")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { directory.appendingPathComponent($0) }
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedQueries.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) named SQL statements",
                executable: try context.tool(named: "EmbedFiles").url,
                arguments: [output.path, "SQL", "members"] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
