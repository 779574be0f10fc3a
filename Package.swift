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
        .systemLibrary(name: "CEpoll"),  // epoll, eventfd, timerfd: not in Swift's Glibc module

        // Pure Swift foundations
        .target(name: "JSON"),
        .target(name: "Crypto", dependencies: ["COpenSSL", "JSON"]),

        // One module per concern
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        .target(name: "HTTPClient", dependencies: ["CCurl"]),
        .target(name: "HTTPServer", dependencies: ["CNGHTTP2", "CHTTPParser", "COpenSSL", "CEpoll"]),
        .target(name: "FCM", dependencies: ["JSON", "Crypto", "HTTPClient"],
                exclude: ["Rules"], plugins: [.plugin(name: "EmbedMessageRules")]),
        .target(name: "Queue", dependencies: ["Postgres", "JSON", "FCM", "Crypto"],
                plugins: [.plugin(name: "EmbedMigrations")]),
        .target(name: "Worker", dependencies: ["Queue", "FCM", "HTTPClient", "Postgres", "JSON", "CEpoll"]),
        .target(name: "Emulator", dependencies: ["HTTPServer", "FCM", "JSON", "Crypto"]),
        .target(name: "Dashboard", dependencies: ["HTTPServer", "Queue", "Postgres", "JSON", "Crypto"]),
        .executableTarget(name: "HeraldCLI",
                          dependencies: ["Worker", "Emulator", "Dashboard", "Queue", "FCM", "HTTPClient", "Postgres", "JSON", "Crypto"]),

        // Files compiled into the binary as string constants (one tool for both plugins below)
        .executableTarget(name: "EmbedFiles", path: "Plugins/EmbedFiles"),
        // migrations/*.sql compiled into the binary, so `herald migrate` works wherever it is installed
        .plugin(name: "EmbedMigrations", capability: .buildTool(), dependencies: ["EmbedFiles"],
                path: "Plugins/EmbedMigrations"),
        // Sources/FCM/Rules/message-rules.json compiled into the FCM module (validation rules shared
        // by the Swift validator and herald.validate_message in PostgreSQL)
        .plugin(name: "EmbedMessageRules", capability: .buildTool(), dependencies: ["EmbedFiles"],
                path: "Plugins/EmbedMessageRules"),

        // Tests: helpers, unit tests (no socket, no database), integration tests (real PostgreSQL
        // and real HTTP/2 servers on loopback)
        .target(name: "TestSupport", dependencies: ["Postgres", "Queue"], path: "Tests/TestSupport"),
        .testTarget(name: "UnitTests",
                    dependencies: ["JSON", "Crypto", "FCM", "Queue", "Worker", "Emulator", "Postgres"]),
        .testTarget(name: "IntegrationTests",
                    dependencies: ["TestSupport", "Postgres", "Queue", "Worker", "Emulator", "Dashboard", "HTTPClient",
                                   "HTTPServer", "FCM", "JSON", "Crypto"]),
    ],
    swiftLanguageModes: [.v6]
)
