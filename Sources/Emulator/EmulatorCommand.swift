import Glibc
import HTTPServer

/// `herald emulator`: parses its flags, runs an `EmulatorServer` until SIGINT or SIGTERM.
public enum EmulatorCommand {
    public static let help = """
        USAGE: herald emulator [options]

        Runs a local stand-in for Firebase Cloud Messaging: the HTTP v1 send API, the OAuth2 token
        endpoint, device groups, fault injection and observation endpoints. HTTP/2 (h2c prior
        knowledge, or h2 over TLS by ALPN) and HTTP/1.1 share one port.

        OPTIONS:
          --host ADDRESS                 address to listen on (default 127.0.0.1)
          --port PORT                    port to listen on, 0 for any free one (default 8085)
          --threads N                    event-loop threads (default 2)
          --accept-mode MODE             acceptor (one thread accepts, deals connections out
                                         round-robin; default) or reuseport (a listener per thread)
          --latency-ms N                 answer every send N milliseconds late (default 0)
          --scenario FILE                JSON scenario: scripts per token prefix, random errors,
                                         latency, a project quota (format: see below)
          --write-service-account FILE   generate a service account (fresh RSA key) whose token_uri
                                         is this emulator and write it to FILE (mode 0600)
          --project-id ID                project of the written service account (default herald-emulator)
          --service-account FILE         also accept JWTs of an existing service-account file
          --tls-cert FILE --tls-key FILE serve HTTPS with this PEM certificate chain and key
          --token-lifetime SECONDS       expires_in of issued access tokens (default 3600)
          --public-url URL               the URL clients reach this emulator at, when it differs
                                         from where it listens (e.g. http://emulator:8085 in
                                         docker-compose); used in token_uri of written accounts
          --max-stored-messages N        delivered messages kept for /emulator/messages (default 1000000)
          -h, --help                     show this help

        ENDPOINTS:
          POST /token                               OAuth2 jwt-bearer grant
          POST /v1/projects/{project}/messages:send send one message (validated as FCM does); with
                                                    "validate_only": true it answers without delivering
                                                    (counted in /emulator/stats, not in /emulator/messages)
          POST /fcm/notification                    device groups: create, add, remove
          GET  /fcm/notification?notification_key_name=NAME
          GET  /emulator/messages[?token=T|topic=T|condition=C][&limit=N]
          DELETE /emulator/messages                 forget messages, counters, fault attempts
          GET  /emulator/stats                      counts, rates, streams, Retry-After violations

        FAULT TOKENS (the message's token; attempts are counted per exact token):
          fail-unregistered...   404 UNREGISTERED            fail-invalid...   400 INVALID_ARGUMENT
          fail-mismatch...       403 SENDER_ID_MISMATCH      fail-auth...      401 THIRD_PARTY_AUTH_ERROR
          fail-quota-N...        429 QUOTA_EXCEEDED, Retry-After: N, on the first attempt, then success
          fail-unavailable-N...  503 UNAVAILABLE, Retry-After: N, on the first attempt, then success
          fail-internal-K...     500 INTERNAL on the first K attempts, then success
          fail-quota, fail-unavailable, fail-internal (no number): fail on every attempt,
                                 without Retry-After

        SCENARIO FILE:
          {"seed": 42, "latency_ms": 20 | {"min": 5, "max": 50}, "error_rate": 0.02,
           "random_errors": [{"error": "UNAVAILABLE", "retry_after": 1}],
           "quota": {"per_minute": 600000, "burst": 10000},
           "scripts": [{"prefix": "flaky-", "answers": [{"error": "INTERNAL"}, "success"],
                        "then": "success"}]}
        """

    /// Runs the emulator in the foreground; returns the process exit code once a SIGINT or
    /// SIGTERM stopped it. Throws `EmulatorError` (naming the flag) for unusable arguments.
    public static func run(arguments: [String]) throws -> Int32 {
        guard let options = try Options.parse(arguments) else {
            print(help)
            return 0
        }
        // Block the stop signals before any thread starts, so every thread inherits the mask and
        // the signals wait for sigwait below.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        let emulator = EmulatorServer(configuration: options.configuration)
        try emulator.start()
        for path in options.trustedAccounts {
            do {
                try emulator.trustServiceAccount(json: try readTextFile(path))
            } catch {
                emulator.stop()
                throw EmulatorError("--service-account \(path): \(error)")
            }
        }
        if let path = options.serviceAccountPath {
            do {
                try emulator.writeServiceAccount(to: path, projectID: options.projectID)
            } catch {
                emulator.stop()
                throw EmulatorError("--write-service-account: \(error)")
            }
            printError("herald emulator: service account for project \(options.projectID) written to \(path)")
        }
        let protocols = options.configuration.tls == nil ? "h2c, HTTP/1.1" : "h2, HTTP/1.1 over TLS"
        print("herald emulator listening on \(emulator.baseURL) (\(protocols))")
        fflush(nil)

        var received: Int32 = 0
        while sigwait(&signals, &received) != 0 {}
        emulator.stop()
        printError("herald emulator: stopped on \(received == SIGTERM ? "SIGTERM" : "SIGINT")")
        return 0
    }

    /// The parsed command line.
    public struct Options: Sendable {
        public var configuration = EmulatorConfiguration()
        public var serviceAccountPath: String? = nil
        public var projectID = "herald-emulator"
        public var trustedAccounts: [String] = []

        /// nil when help was asked for.
        public static func parse(_ arguments: [String]) throws(EmulatorError) -> Options? {
            var options = Options()
            var certificate: String? = nil
            var key: String? = nil
            var index = 0
            func usage(_ text: String) -> EmulatorError { EmulatorError("\(text); run 'herald emulator --help' for the options") }
            while index < arguments.count {
                var flag = arguments[index]
                var inline: String? = nil
                if flag.hasPrefix("--"), let eq = flag.firstIndex(of: "=") {
                    inline = String(flag[flag.index(after: eq)...])
                    flag = String(flag[..<eq])
                }
                index += 1
                func value() throws(EmulatorError) -> String {
                    if let inline { return inline }
                    guard index < arguments.count else { throw usage("\(flag) needs a value") }
                    defer { index += 1 }
                    return arguments[index]
                }
                func integer(_ range: ClosedRange<Int>) throws(EmulatorError) -> Int {
                    let text = try value()
                    guard let n = Int(text), range.contains(n) else {
                        throw usage("\(flag) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
                    }
                    return n
                }
                switch flag {
                case "-h", "--help": return nil
                case "--host": options.configuration.host = try value()
                case "--port": options.configuration.port = try integer(0...65535)
                case "--threads": options.configuration.threads = try integer(1...64)
                case "--accept-mode":
                    switch try value() {
                    case "acceptor": options.configuration.acceptMode = .acceptorHandsOff
                    case "reuseport": options.configuration.acceptMode = .reusePort
                    case let other: throw usage("--accept-mode must be acceptor or reuseport, not '\(other)'")
                    }
                case "--latency-ms": options.configuration.latencyMilliseconds = try integer(0...600_000)
                case "--token-lifetime": options.configuration.tokenLifetimeSeconds = try integer(1...86400 * 365)
                case "--public-url":
                    let url = try value()
                    guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                        throw EmulatorError("--public-url: \"\(url)\" must start with http:// or https://")
                    }
                    options.configuration.publicURL = url
                case "--max-stored-messages": options.configuration.maxStoredMessages = try integer(0...Int(Int32.max))
                case "--write-service-account": options.serviceAccountPath = try value()
                case "--project-id":
                    let project = try value()
                    guard !project.isEmpty, !project.contains("/") else { throw usage("--project-id must be a project ID such as my-app-123, not '\(project)'") }
                    options.projectID = project
                case "--service-account": options.trustedAccounts.append(try value())
                case "--tls-cert": certificate = try value()
                case "--tls-key": key = try value()
                case "--scenario":
                    let path = try value()
                    let text: String
                    do { text = try readTextFile(path) } catch { throw usage("--scenario: \(error)") }
                    do {
                        options.configuration.scenario = try Scenario.parse(text)
                    } catch {
                        throw usage("--scenario \(path): \(error)")
                    }
                default:
                    throw usage("unknown option '\(flag)'")
                }
            }
            switch (certificate, key) {
            case (nil, nil): break
            case let (certificate?, key?):
                options.configuration.tls = HTTPServer.TLSFiles(certificateFile: certificate, privateKeyFile: key)
            case (nil, _): throw usage("--tls-key needs --tls-cert as well")
            case (_, nil): throw usage("--tls-cert needs --tls-key as well")
            }
            return options
        }
    }
}

/// One line to standard error (Glibc's `stderr` is a global Swift 6 will not share across threads).
func printError(_ line: String) {
    var bytes = Array(line.utf8)
    bytes.append(0x0A)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}
