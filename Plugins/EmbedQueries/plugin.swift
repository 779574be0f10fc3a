import Foundation
import PackagePlugin

/// Turns the target's named statements into a Swift source file with one string constant per file
/// (`SQL/claim_jobs.sql` becomes `SQL.claimJobs`), so SQL lives in .sql files and a missing one
/// fails the build: `SQL/*.sql` (the job life cycle) and `SQL/admin/*.sql` (checks, reports and
/// the operators' actions). `SQL/functions` and `SQL/views` are schema, embedded by EmbedMigrations.
/// The Benchmark target uses it too, for `herald bench`'s own statements (`Sources/Benchmark/SQL`).
@main
struct EmbedQueries: BuildToolPlugin {
    static let folders = ["", "admin"]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        // Target.directoryURL needs tools 6.1; the package declares 6.0, so use the default layout.
        let root = context.package.directoryURL.appendingPathComponent("Sources/\(target.name)/SQL")
        let inputs = try Self.folders.flatMap { folder in
            let directory = folder.isEmpty ? root : root.appendingPathComponent(folder)
            // A target may keep all its statements in SQL/ (the Benchmark module has no admin/).
            guard FileManager.default.fileExists(atPath: directory.path) else { return [URL]() }
            return try FileManager.default.contentsOfDirectory(atPath: directory.path)
                .filter { $0.hasSuffix(".sql") }
                .sorted()
                .map { directory.appendingPathComponent($0) }
        }
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedQueries.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) named SQL statements",
                executable: try context.tool(named: "EmbedFiles").url,
                arguments: [output.path, "SQL", "members"] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
