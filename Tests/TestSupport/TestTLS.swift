import Emulator
import Foundation
import HTTPServer

/// The certificate every emulator a worker meets in a test serves, made once per test process
/// the way `herald work` makes its in-process emulator's (`EmulatorCertificate`: an authority
/// made for it alone signs a certificate for 127.0.0.1, ::1 and localhost), and removed when the
/// process exits. A worker is given `caFile` as `HERALD_CA_FILE`, as a user gives theirs, so the
/// worker-level suites take the road production takes: HTTP/2 over TLS by ALPN.
public enum TestTLS {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var made: EmulatorCertificate?

    /// The shared certificate (made at the first call).
    public static func certificate() throws -> EmulatorCertificate {
        lock.lock()
        defer { lock.unlock() }
        if let made { return made }
        let certificate = try EmulatorCertificate()
        made = certificate
        atexit { TestTLS.removeAtExit() }
        return certificate
    }

    /// The authority's certificate a client of a test's TLS emulator trusts.
    public static func caFile() throws -> String { try certificate().caFile }

    /// The server's certificate and key, for `EmulatorConfiguration.tls` or `HTTPServer.Configuration.tls`.
    public static func files() throws -> HTTPServer.TLSFiles { try certificate().files }

    /// The authority to trust for `emulator`: TestTLS's when it serves TestTLS's certificate, nil
    /// when it serves cleartext (or a certificate of the test's own making).
    public static func caFile(for emulator: EmulatorServer) throws -> String? {
        guard let served = emulator.configuration.tls, served.certificateFile == (try files()).certificateFile else { return nil }
        return try caFile()
    }

    private static func removeAtExit() {
        lock.lock()
        defer { lock.unlock() }
        made?.remove()
    }
}

/// How a test's emulator is reached by the workers it starts.
public enum EmulatorTransport: Sendable {
    /// HTTPS with `TestTLS`'s certificate, h2 by ALPN: the road production takes (the default).
    case tls
    /// Plain http:// on loopback, as a user may ask for (the worker speaks HTTP/1.1 to it).
    case cleartext
}

/// An emulator that workers reach over `transport` (TLS by default), on a free port unless
/// `configure` picks one; the caller stops it. Its `baseURL` is https:// with TLS.
public func startWorkerEmulator(transport: EmulatorTransport = .tls, _ configure: (inout EmulatorConfiguration) -> Void = { _ in }) throws -> EmulatorServer {
    let emulator = EmulatorServer(configuration: try workerEmulatorConfiguration(transport: transport, configure))
    try emulator.start()
    return emulator
}

/// The configuration `startWorkerEmulator` starts with: one thread, a free port on 127.0.0.1,
/// TestTLS's certificate unless cleartext is asked for.
public func workerEmulatorConfiguration(transport: EmulatorTransport = .tls,
                                        _ configure: (inout EmulatorConfiguration) -> Void = { _ in }) throws -> EmulatorConfiguration {
    var configuration = EmulatorConfiguration(host: "127.0.0.1", port: 0, threads: 1)
    if case .tls = transport { configuration.tls = try TestTLS.files() }
    configure(&configuration)
    return configuration
}

/// What a worker is given to reach `emulator`: FCM and Instance ID at its base URL, and the
/// authority of its certificate when it serves TLS (`HERALD_CA_FILE`).
public func emulatorEnvironment(_ emulator: EmulatorServer) throws -> [String: String] {
    var environment = ["HERALD_FCM_URL": emulator.baseURL, "HERALD_IID_URL": emulator.baseURL]
    if let caFile = try TestTLS.caFile(for: emulator) { environment["HERALD_CA_FILE"] = caFile }
    return environment
}
