import Foundation
import Testing
@testable import Crypto

/// The certificate the emulator makes for itself, checked by an independent verifier: the openssl
/// command line, as a client verifies FCM's (chain to the trusted authority, host name, purpose).
@Suite struct LocalServerCertificateTests {
    /// Runs the openssl command line in a fresh folder holding `files` (name: text); its exit
    /// status and what it printed.
    static func openssl(_ arguments: [String], files: [String: String]) throws -> (status: Int32, output: String) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-cert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, text) in files { try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// `openssl verify` of the server certificate against the authority alone, for `host`, as a
    /// TLS server's certificate.
    static func verify(_ made: LocalServerCertificate, host: String) throws -> (status: Int32, output: String) {
        let check = host.contains(":") || host.first?.isNumber == true ? "-verify_ip" : "-verify_hostname"
        return try openssl(["verify", "-x509_strict", "-purpose", "sslserver", "-CAfile", "ca.pem", check, host, "server.pem"],
                           files: ["ca.pem": made.authorityPEM, "server.pem": made.certificatePEM])
    }

    @Test func theServerCertificateVerifiesAgainstItsAuthorityForEachLoopbackName() throws {
        let made = try LocalServerCertificate()
        for host in ["127.0.0.1", "::1", "localhost"] {
            let result = try Self.verify(made, host: host)
            #expect(result.status == 0, "\(host): \(result.output)")
        }
        // Any other name or address is refused: the certificate says whom it is for.
        for host in ["127.0.0.2", "example.com", "fcm.googleapis.com"] {
            let result = try Self.verify(made, host: host)
            #expect(result.status != 0, "\(host) accepted: \(result.output)")
        }
        #expect(made.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(!made.authorityPEM.contains("PRIVATE KEY") && !made.certificatePEM.contains("PRIVATE KEY"))
    }

    /// Each run makes its own authority: a client that trusts one run's refuses another's.
    @Test func anotherRunsAuthorityDoesNotVouchForIt() throws {
        let first = try LocalServerCertificate(), second = try LocalServerCertificate()
        #expect(first.authorityPEM != second.authorityPEM)
        let mixed = try Self.openssl(["verify", "-CAfile", "ca.pem", "server.pem"],
                                     files: ["ca.pem": first.authorityPEM, "server.pem": second.certificatePEM])
        #expect(mixed.status != 0, "\(mixed.output)")
    }

    @Test func namesGivenBecomeAlternativeNamesOfTheirKind() throws {
        #expect(try LocalServerCertificate.alternativeName("10.1.2.3") == "IP:10.1.2.3")
        #expect(try LocalServerCertificate.alternativeName("[fe80::1]") == "IP:fe80::1")
        #expect(try LocalServerCertificate.alternativeName("emulator") == "DNS:emulator")
        #expect(try LocalServerCertificate.alternativeName("*.example.test") == "DNS:*.example.test")
        let made = try LocalServerCertificate(hosts: ["emulator", "10.1.2.3"])
        #expect(try Self.verify(made, host: "emulator").status == 0)
        #expect(try Self.verify(made, host: "10.1.2.3").status == 0)
        #expect(try Self.verify(made, host: "localhost").status != 0)
    }

    /// Text that would change the subjectAltName list's meaning (a comma, another entry) or is no
    /// name at all is refused, naming what was given.
    @Test func aHostThatIsNoNameIsRefused() {
        for bad in ["a,DNS:evil.example", "emulator:8085", "", "-lead.example", "under_score", "email:x@y", "*"] {
            do {
                _ = try LocalServerCertificate(hosts: [bad])
                Issue.record("'\(bad)' accepted")
            } catch {
                #expect(error.description.contains("'\(bad)'"), "\(error)")
            }
        }
        #expect(throws: CryptoError.self) { try LocalServerCertificate(hosts: []) }
    }
}
