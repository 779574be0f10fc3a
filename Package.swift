// swift-tools-version:6.0
import PackageDescription

// The C libraries come from Debian (see .ci/install-deps); each is bound by one systemLibrary
// target and used by exactly one Swift module, so nothing above that layer sees a C type.
let package = Package(
    name: "Herald",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "herald", targets: ["HeraldCLI"]),
    ],
    targets: [
        // C bindings
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
        .systemLibrary(name: "CEpoll"),  // epoll, eventfd, timerfd, spawn close-from: not in Swift's Glibc module

        // Pure Swift foundations
        .target(name: "JSON"),
        .target(name: "CommandOptions"),
        .target(name: "Crypto", dependencies: ["COpenSSL", "JSON"]),
        .target(name: "Logging", dependencies: ["JSON"]),
        // The one shape of every long-running part (`Service`) and the group that runs and stops them
        .target(name: "Lifecycle"),

        // One module per concern
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        // A private PostgreSQL cluster (initdb, pg_ctl) for the embedded default, the bench and the tests
        .target(name: "LocalPostgres", dependencies: ["Postgres", "CEpoll"]),
        .target(name: "HTTPClient", dependencies: ["CCurl"]),
        .target(name: "HTTPServer", dependencies: ["CNGHTTP2", "CHTTPParser", "COpenSSL", "CEpoll"]),
        .target(name: "FCM", dependencies: ["JSON", "Crypto", "HTTPClient"],
                exclude: ["Rules"], plugins: [.plugin(name: "EmbedMessageRules")]),
        // APNs's wire: provider tokens, requests from messages, Apple's answers as actions (pure; no database);
        // FCM for the APNs rule file (push types, topic suffixes, headers) the requests are made by
        .target(name: "APNs", dependencies: ["Crypto", "JSON", "HTTPClient", "FCM"]),
        // Web Push's wire, pure: RFC 8291 encryption, VAPID (RFC 8292) tokens and subjects, the
        // endpoint check against internal addresses
        .target(name: "WebPush", dependencies: ["Crypto", "JSON"]),
        .target(name: "Queue", dependencies: ["Postgres", "JSON", "FCM", "Crypto", "Lifecycle"],
                exclude: ["SQL"], plugins: [.plugin(name: "EmbedMigrations"), .plugin(name: "EmbedQueries")]),
        // Prometheus text format, and the shared-memory counters a pool's workers write (counted
        // by Queue's `MessageOutcome`)
        .target(name: "Metrics", dependencies: ["Queue"]),
        .target(name: "Worker", dependencies: ["Queue", "FCM", "APNs", "Crypto", "HTTPClient", "HTTPServer", "Postgres", "JSON", "CEpoll",
                                              "Logging", "Metrics", "Lifecycle"]),
        .target(name: "Emulator", dependencies: ["HTTPServer", "FCM", "APNs", "WebPush", "JSON", "Crypto", "CommandOptions"]),
        // herald bench's phases, its own SQL, the PostgreSQL ceiling and the sends-alone measurements, kept out of the product's Queue
        .target(name: "Benchmark", dependencies: ["Queue", "Postgres", "Metrics", "HTTPClient", "JSON", "Logging", "Worker", "FCM",
                                                 "Emulator", "CommandOptions", "WebPush", "Crypto"],
                exclude: ["SQL"], plugins: [.plugin(name: "EmbedQueries")]),
        .target(name: "Dashboard", dependencies: ["HTTPServer", "Queue", "Postgres", "JSON", "Crypto", "Lifecycle"]),
        .executableTarget(name: "HeraldCLI",
                          dependencies: ["CommandOptions", "Worker", "Emulator", "Dashboard", "Queue", "Benchmark", "LocalPostgres", "FCM", "HTTPClient",
                                         "Postgres", "JSON", "Crypto", "Logging", "Metrics", "Lifecycle"]),

        // Files compiled into the binary as string constants (one tool for both plugins below)
        .executableTarget(name: "EmbedFiles", path: "Plugins/EmbedFiles"),
        // migrations/*.sql compiled into the binary, so `herald migrate` works wherever it is installed
        .plugin(name: "EmbedMigrations", capability: .buildTool(), dependencies: ["EmbedFiles"],
                path: "Plugins/EmbedMigrations"),
        // Sources/Queue/SQL/*.sql (and Sources/Benchmark/SQL/*.sql), one named statement per file,
        // compiled into the module
        .plugin(name: "EmbedQueries", capability: .buildTool(), dependencies: ["EmbedFiles"],
                path: "Plugins/EmbedQueries"),
        // Sources/FCM/Rules/message-rules.json compiled into the FCM module (validation rules shared
        // by the Swift validator and herald.validate_message in PostgreSQL)
        .plugin(name: "EmbedMessageRules", capability: .buildTool(), dependencies: ["EmbedFiles"],
                path: "Plugins/EmbedMessageRules"),

        // Tests: helpers, unit tests (no socket, no database), integration tests (real PostgreSQL
        // and real HTTP/2 servers on loopback)
        .target(name: "TestSupport", dependencies: ["Postgres", "LocalPostgres", "Queue", "Emulator", "HTTPServer", "Crypto", "FCM", "JSON"], path: "Tests/TestSupport"),
        .testTarget(name: "UnitTests",
                    dependencies: ["JSON", "Crypto", "FCM", "APNs", "WebPush", "HTTPClient", "Queue", "Worker", "Emulator", "Postgres", "Logging", "Metrics", "Lifecycle"]),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["TestSupport", "Postgres", "LocalPostgres", "Queue", "Worker", "Emulator", "Dashboard", "HTTPClient",
                                   "HTTPServer", "FCM", "APNs", "WebPush", "JSON", "Crypto", "Metrics", "Benchmark"]),
    ],
    swiftLanguageModes: [.v6]
)
