import Foundation
import Postgres
import Testing
import TestSupport

/// Every command as a user starts it from a shell: the real binary.
@Suite struct CommandLineTests {
    static let commands = ["work", "migrate", "send", "groups", "dead", "stats", "campaigns", "queues", "dashboard", "bench", "emulator"]

    @Test(arguments: commands) func everyCommandExplainsItself(_ command: String) throws {
        let run = try HeraldProcess.run([command, "--help"], environment: [:], timeout: 30)
        #expect(run.status == 0, "herald \(command) --help: \(run.output)")
        #expect(run.output.contains("herald \(command)"))
    }

    @Test func migrateAppliesEveryMigrationOnceAndLogsInTheFormatAsked() throws {
        let database = try TestDatabase.fresh(migrated: false)
        defer { database.drop() }
        let first = try HeraldProcess.run(["migrate"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(first.status == 0, "\(first.output)")
        #expect(first.output.contains("040_scheduled_state"))
        let again = try HeraldProcess.run(["migrate", "--log-format", "json"], environment: ["DATABASE_URL": database.url], timeout: 60)
        #expect(again.status == 0, "\(again.output)")
        #expect(!again.output.contains("applied"), "nothing left to apply: \(again.output)")
    }
}
