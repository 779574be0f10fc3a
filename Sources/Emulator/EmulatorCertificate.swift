import Crypto
import Glibc
import HTTPServer

/// The emulator's HTTPS of its own: a `LocalServerCertificate` for the addresses it is reached
/// at, written to a fresh folder only this user can read: the server's certificate and key,
/// which the emulator serves (`files`, for `EmulatorConfiguration.tls`), and the authority's
/// certificate, which a worker trusts (`caFile`, handed over as `HERALD_CA_FILE`), so a worker
/// sends to the emulator over TLS exactly as it sends to FCM.
///
/// ```swift
/// let certificate = try EmulatorCertificate()
/// var configuration = EmulatorConfiguration(port: 0)
/// configuration.tls = certificate.files
/// // workers: HERALD_FCM_URL=<the emulator's https baseURL>, HERALD_CA_FILE=certificate.caFile
/// certificate.remove()  // once no worker needs the files
/// ```
public final class EmulatorCertificate: Sendable {
    /// The folder holding the three files.
    public let folder: String
    /// The server's certificate and private key, as the emulator serves them.
    public let files: HTTPServer.TLSFiles
    /// The authority's certificate (PEM): what a client trusts.
    public let caFile: String
    /// The names and addresses the certificate is valid for.
    public let hosts: [String]
    private let authorityPEM: String

    /// Makes the certificate for `hosts` (default 127.0.0.1, ::1 and localhost) and writes it to
    /// a new folder under TMPDIR (or /tmp).
    public init(hosts: [String] = LocalServerCertificate.loopbackHosts) throws(EmulatorError) {
        let made: LocalServerCertificate
        do { made = try LocalServerCertificate(hosts: hosts) } catch {
            throw EmulatorError("cannot make the emulator's TLS certificate: \(error)")
        }
        let folder = try makeTemporaryFolder(prefix: "herald-emulator-tls")
        do {
            try writePrivateFile(folder + "/ca.pem", contents: made.authorityPEM)
            try writePrivateFile(folder + "/server.pem", contents: made.certificatePEM)
            try writePrivateFile(folder + "/server-key.pem", contents: made.privateKeyPEM)
        } catch {
            EmulatorCertificate.removeFolder(folder)
            throw error
        }
        // The authority's certificate is public: anyone may read it to trust the emulator.
        chmod(folder + "/ca.pem", 0o644)
        self.folder = folder
        self.caFile = folder + "/ca.pem"
        self.files = HTTPServer.TLSFiles(certificateFile: folder + "/server.pem", privateKeyFile: folder + "/server-key.pem")
        self.hosts = hosts
        self.authorityPEM = made.authorityPEM
    }

    /// The hosts a certificate for an emulator listening on `host`, reached at `publicURL`, must
    /// name: the loopback ones, and the listening host and the public URL's host when they are
    /// other names (a wildcard address names no host of its own).
    public static func hosts(listening host: String, publicURL: String?) -> [String] {
        var hosts = LocalServerCertificate.loopbackHosts
        func add(_ name: String) {
            var bare = name
            if bare.hasPrefix("[") && bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
            guard !bare.isEmpty, bare != "0.0.0.0", bare != "::", !hosts.contains(bare) else { return }
            hosts.append(bare)
        }
        add(host)
        if let publicURL, let authority = publicURL.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first {
            // `scheme://host[:port]/...`: the host, brackets and all for an IPv6 address.
            var name = Substring(authority)
            if let at = name.lastIndex(of: "@") { name = name[name.index(after: at)...] }
            if name.hasPrefix("["), let close = name.firstIndex(of: "]") {
                name = name[...close]
            } else if let colon = name.lastIndex(of: ":") {
                name = name[..<colon]
            }
            add(String(name))
        }
        return hosts
    }

    /// Writes the authority's certificate to `path` as well (mode 0644: it is public), for a
    /// worker that cannot read the private folder; `remove()` leaves it. A file already there is
    /// replaced whole by a rename, so a worker reading it meanwhile finds the old certificate or
    /// the new one, never a part.
    public func writeAuthority(to path: String) throws(EmulatorError) {
        let partial = path + ".partial-\(getpid())"
        do { try writePrivateFile(partial, contents: authorityPEM) } catch {
            unlink(partial)
            throw error
        }
        guard chmod(partial, 0o644) == 0, rename(partial, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(partial)
            throw EmulatorError("cannot write \(path): \(reason)")
        }
    }

    /// Removes the folder and its files; the emulator must not be started with `files` after.
    public func remove() { EmulatorCertificate.removeFolder(folder) }

    private static func removeFolder(_ folder: String) {
        for name in ["ca.pem", "server.pem", "server-key.pem"] { unlink(folder + "/" + name) }
        rmdir(folder)
    }
}
