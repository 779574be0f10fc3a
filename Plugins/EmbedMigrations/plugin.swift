import Foundation
import PackagePlugin

/// Turns the schema's SQL into Swift source files of the target it serves, so the binary carries
/// its schema and `herald migrate` needs no files beside it:
/// - `migrations/*.sql` at the package root (numbered, applied once each: tables, indexes, old
///   function signatures renamed aside, data moves) become `EmbeddedMigrations`;
/// - the target's `SQL/functions/*.sql` and `SQL/views/*.sql` (one `herald.*` function or view
///   per file, its one current definition, replaced whole whenever the file changes) become
///   `EmbeddedFunctions` and `EmbeddedViews`.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let tool = try context.tool(named: "EmbedFiles").url
        // Target.directoryURL needs tools 6.1; the package declares 6.0, so use the default layout.
        let sql = context.package.directoryURL.appendingPathComponent("Sources/\(target.name)/SQL")
        let lists: [(folder: URL, type: String, what: String)] = [
            (context.package.directoryURL.appendingPathComponent("migrations"), "EmbeddedMigrations", "migrations"),
            (sql.appendingPathComponent("functions"), "EmbeddedFunctions", "function definitions"),
            (sql.appendingPathComponent("views"), "EmbeddedViews", "view definitions"),
        ]
        return try lists.map { list in
            let names = try FileManager.default.contentsOfDirectory(atPath: list.folder.path)
                .filter { $0.hasSuffix(".sql") }
                .sorted()
            let inputs = names.map { list.folder.appendingPathComponent($0) }
            let output = context.pluginWorkDirectoryURL.appendingPathComponent("\(list.type).swift")
            return .buildCommand(
                displayName: "Embedding \(names.count) \(list.what)",
                executable: tool,
                arguments: [output.path, list.type, "list"] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        }
    }
}
