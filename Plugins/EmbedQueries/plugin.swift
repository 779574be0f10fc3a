import Foundation
import PackagePlugin

/// Turns the target's named statements into a Swift source file with one string constant per file
/// (`SQL/statements/claim_due_jobs.sql` becomes `SQL.claimDueJobs`), so SQL lives in .sql files and
/// a missing one fails the build: `SQL/statements/*.sql` (the job life cycle) and `SQL/admin/*.sql`
/// (checks, reports and the operators' actions). `SQL/functions` and `SQL/views` are schema,
/// embedded by EmbedMigrations. A constant is named after its file alone, so no two files of the
/// two folders may share a name (the build would fail on the duplicate constant).
/// The Benchmark target uses it too, for `herald bench`'s own statements
/// (`Sources/Benchmark/SQL/statements`).
@main
struct EmbedQueries: BuildToolPlugin {
    static let folders = ["statements", "admin"]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        // Target.directoryURL needs tools 6.1; the package declares 6.0, so use the default layout.
        let root = context.package.directoryURL.appendingPathComponent("Sources/\(target.name)/SQL")
        let inputs = try Self.folders.flatMap { folder in
            let directory = root.appendingPathComponent(folder)
            // A target need not have both folders (the Benchmark module has no admin/).
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
