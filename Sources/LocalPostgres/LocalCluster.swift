import Foundation
import CEpoll
import Postgres

/// A private PostgreSQL cluster under a local folder: the embedded default of `herald work` and
/// `herald bench` when no DATABASE_URL is given, and the tests' database when CI provides none.
/// It runs the server binaries found on the machine (initdb, pg_ctl) as a non-root user, listens
/// on 127.0.0.1 only, and is reused when the folder already holds one.
public final class LocalCluster: @unchecked Sendable {
    public let directory: String
    public let port: Int
    public let user = "herald"

    public var url: String { url(database: "postgres") }
    public func url(database: String) -> String { "postgresql://\(user)@127.0.0.1:\(port)/\(database)" }

    private init(directory: String, port: Int) {
        self.directory = directory
        self.port = port
    }

    /// Finds the newest PostgreSQL server binaries on the machine.
    public static func binaries() throws(PostgresError) -> String {
        var candidates: [String] = []
        if let listed = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            candidates += listed.sorted { $0.compare($1, options: .numeric) == .orderedDescending }
                .map { "/usr/lib/postgresql/\($0)/bin" }
        }
        candidates += ["/usr/local/pgsql/bin", "/usr/local/bin", "/usr/bin", "/opt/homebrew/bin"]
        for directory in candidates where FileManager.default.isExecutableFile(atPath: directory + "/initdb") {
            return directory
        }
        throw PostgresError("no PostgreSQL server binaries (initdb, pg_ctl) found; install postgresql (see .ci/install-deps) or set DATABASE_URL")
    }

    /// Starts (initialising first if needed) a cluster in `directory`. `durable: false` turns off
    /// fsync, for tests and benchmarks that throw the data away.
    public static func start(directory: String, port: Int? = nil, durable: Bool = true,
                             settings: [String: String] = [:]) throws(PostgresError) -> LocalCluster {
        let bin = try binaries()
        let fm = FileManager.default
        let asRoot = getuid() == 0
        var directory = directory
        do {
            try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw PostgresError("cannot create the PostgreSQL folder \(directory): \(error.localizedDescription)")
        }
        if asRoot {
            // The server runs as the postgres user, which may not reach a folder under a private
            // parent (root's home is 0700). Then the cluster lives under /var/tmp instead.
            if (try? run(["/usr/bin/test", "-x", directory], asPostgres: true)) == nil {
                directory = "/var/tmp/herald-postgres-" + stableHash(directory)
                do {
                    try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
                } catch {
                    throw PostgresError("cannot create the PostgreSQL folder \(directory): \(error.localizedDescription)")
                }
            }
            _ = try run(["/bin/chown", "-R", "postgres", directory], asPostgres: false)
        }
        let data = directory + "/data"
        if !fm.fileExists(atPath: data + "/PG_VERSION") {
            _ = try run([bin + "/initdb", "-D", data, "-U", "herald", "-A", "trust", "-E", "UTF8", "--no-sync"],
                        asPostgres: asRoot, log: directory + "/initdb.log")
        }
        let chosenPort: Int
        if let port { chosenPort = port } else { chosenPort = try freePort() }
        // A Unix socket path has a limit of 107 bytes; a deep folder uses /tmp for the socket.
        let socketDirectory = (directory + "/.s.PGSQL.\(chosenPort)").utf8.count < 100 ? directory : "/tmp"
        var options = ["-p \(chosenPort)", "-k \(socketDirectory)", "-c listen_addresses=127.0.0.1", "-c max_connections=200"]
        if !durable { options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"] }
        for (key, value) in settings.sorted(by: { $0.key < $1.key }) { options.append("-c \(key)=\(value)") }
        // A server left running by an earlier process in this folder is stopped first.
        _ = try? run([bin + "/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"], asPostgres: asRoot)
        _ = try run([bin + "/pg_ctl", "-D", data, "-l", directory + "/server.log", "-w", "-t", "60",
                     "-o", options.joined(separator: " "), "start"], asPostgres: asRoot)
        return LocalCluster(directory: directory, port: chosenPort)
    }

    /// Starts a streaming standby of `primary` in `directory` (a base backup of it, then
    /// recovery following it), named `applicationName` for the primary's
    /// `synchronous_standby_names`. Settings as for `start`.
    public static func startStandby(of primary: LocalCluster, directory: String, applicationName: String = "standby1",
                                    durable: Bool = true, settings: [String: String] = [:]) throws(PostgresError) -> LocalCluster {
        let bin = try binaries()
        let asRoot = getuid() == 0
        let data = directory + "/data"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw PostgresError("cannot create the PostgreSQL folder \(directory): \(error.localizedDescription)")
        }
        if asRoot { _ = try run(["/bin/chown", "-R", "postgres", directory], asPostgres: false) }
        let conninfo = "host=127.0.0.1 port=\(primary.port) user=\(primary.user) application_name=\(applicationName)"
        _ = try run([bin + "/pg_basebackup", "-D", data, "-d", conninfo, "-X", "stream", "-R", "--no-sync", "--checkpoint=fast"], asPostgres: asRoot)
        // -R writes standby.signal and a primary_conninfo; this one names the standby for the
        // primary's synchronous_standby_names (no quote or backslash in it to escape).
        do {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: data + "/postgresql.auto.conf"))
            handle.seekToEndOfFile()
            handle.write(Data("primary_conninfo = '\(conninfo)'\n".utf8))
            try handle.close()
        } catch {
            throw PostgresError("cannot write the standby's primary_conninfo in \(data): \(error.localizedDescription)")
        }
        return try start(directory: directory, durable: durable, settings: settings)
    }

    /// Ends recovery of a standby: it becomes a primary that takes writes.
    public func promote() throws(PostgresError) {
        let bin = try Self.binaries()
        _ = try Self.run([bin + "/pg_ctl", "-D", directory + "/data", "-w", "-t", "60", "promote"], asPostgres: getuid() == 0)
    }

    /// Stops the server at once, without a checkpoint, as a crash would (`pg_ctl stop -m immediate`).
    public func crash() throws(PostgresError) {
        let bin = try Self.binaries()
        _ = try Self.run([bin + "/pg_ctl", "-D", directory + "/data", "-m", "immediate", "-w", "stop"], asPostgres: getuid() == 0)
    }

    /// The shell command that stops this cluster later (as its owner), for a user who kept it.
    public var stopCommand: String {
        let bin = (try? Self.binaries()) ?? "/usr/lib/postgresql/15/bin"
        let command = "\(bin)/pg_ctl -D '\(directory)/data' -m fast stop"
        return getuid() == 0 ? "su postgres -s /bin/sh -c \"\(command)\"" : command
    }

    public func stop() throws(PostgresError) {
        let bin = try Self.binaries()
        _ = try Self.run([bin + "/pg_ctl", "-D", directory + "/data", "-m", "fast", "-w", "stop"], asPostgres: getuid() == 0)
    }

    /// FNV-1a of a path, as 16 hex digits: the same folder maps to the same fallback folder.
    static func stableHash(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }

    public static func freePort() throws(PostgresError) -> Int {
        let fd = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw PostgresError("cannot open a socket to find a free port") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw PostgresError("cannot bind 127.0.0.1 to find a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Runs a program to completion with posix_spawn and waitpid (not Foundation's Process, which
    /// relies on SIGCHLD delivery that a supervisor blocking signals would prevent). Output goes to
    /// a file, never a pipe, and no other descriptor is passed on: pg_ctl's server inherits what
    /// it is given and lives on.
    @discardableResult
    static func run(_ arguments: [String], asPostgres: Bool, log: String? = nil) throws(PostgresError) -> String {
        let argv = asPostgres ? ["/usr/sbin/runuser", "-u", "postgres", "--"] + arguments : arguments
        let output = NSTemporaryDirectory() + "herald-pg-\(UUID().uuidString).log"
        defer { unlink(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else of ours is inherited: a server left running (herald work --keep) would
        // otherwise hold whatever this process inherited, such as the end of a pipe or socket
        // its own parent waits on to see it exit, and that parent would wait forever.
        herald_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        var cStrings: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for pointer in cStrings { free(pointer) } }
        var pid: pid_t = 0
        let spawned = cStrings.withUnsafeMutableBufferPointer { buffer in
            posix_spawn(&pid, argv[0], &actions, &attributes, buffer.baseAddress!, environ)
        }
        guard spawned == 0 else {
            throw PostgresError("cannot run \(argv[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        if let log { try? text.write(toFile: log, atomically: true, encoding: .utf8) }
        guard status == 0 else {
            throw PostgresError("\((arguments[0] as NSString).lastPathComponent) failed (status \(status >> 8)): \(text.suffix(600))")
        }
        return text
    }
}
