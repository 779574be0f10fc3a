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

/// What a first day at the shell runs into: a typo, a version question, a bad number or URL.
@Suite struct FirstDayCommandLineTests {
    @Test func versionIsPrintedAndMatchesTheMetricsLabel() throws {
        for flag in ["--version", "version"] {
            let run = try HeraldProcess.run([flag], environment: [:], timeout: 30)
            #expect(run.status == 0, "\(run.output)")
            let line = run.output.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(line.range(of: #"^herald \d+\.\d+\.\d+$"#, options: .regularExpression) != nil, "herald \(flag): \(line)")
        }
    }

    @Test func aMisspeltCommandGetsASuggestionNotTheWholeUsage() throws {
        let run = try HeraldProcess.run(["wrok"], environment: [:], timeout: 30)
        #expect(run.status == 2)
        #expect(run.output.contains("did you mean 'herald work'?"), "\(run.output)")
        #expect(!run.output.contains("Commands:"), "a suggestion, not the usage: \(run.output)")
        let unknown = try HeraldProcess.run(["frobnicate"], environment: [:], timeout: 30)
        #expect(unknown.status == 2)
        #expect(unknown.output.contains("Commands:"), "nothing near it: the usage lists the commands: \(unknown.output)")
    }

    @Test func aMisspeltOptionGetsASuggestion() throws {
        let run = try HeraldProcess.run(["work", "--concurency", "8"], environment: [:], timeout: 30)
        #expect(run.status == 2)
        #expect(run.output.contains("unknown option --concurency (did you mean --concurrency?)"), "\(run.output)")
    }

    @Test func aNumberOutOfRangeIsShownHowToGiveIt() throws {
        let flag = try HeraldProcess.run(["work", "--concurrency", "0"], environment: [:], timeout: 30)
        #expect(flag.status == 2)
        #expect(flag.output.contains("give e.g. --concurrency 256"), "\(flag.output)")
        let env = try HeraldProcess.run(["work"], environment: ["HERALD_CONCURRENCY": "0"], timeout: 30)
        #expect(env.status == 2)
        #expect(env.output.contains("give e.g. HERALD_CONCURRENCY=256"), "\(env.output)")
    }

    @Test(arguments: ["ftp://fcm.example", "not a url", "https://", "http//127.0.0.1:1"])
    func anFCMURLThatIsNotHTTPIsRefusedBeforeAnythingIsTouched(_ url: String) throws {
        let database = try TestDatabase.fresh(migrated: true)
        defer { database.drop() }
        try database.connect().query("SELECT herald.enqueue('{\"token\": \"first-day-url\"}')")
        let run = try HeraldProcess.run(["work", "--drain", "--fcm-url", url],
                                        environment: ["DATABASE_URL": database.url,
                                                      "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/sa.json"], timeout: 60)
        #expect(run.status == 2, "\(run.output)")
        #expect(run.output.contains("--fcm-url \"\(url)\""), "names the flag and the value: \(run.output)")
        #expect(run.output.contains("https://fcm.googleapis.com"), "says what to give: \(run.output)")
        let available = try database.connect().query("SELECT count(*) FROM herald.jobs WHERE state = 'available'")
        #expect(available[0, 0] == "1", "the job is untouched")
    }
}
