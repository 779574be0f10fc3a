import COpenSSL
import Glibc

/// A server certificate for local addresses, signed by a certificate authority made for it alone:
/// what a server on this machine (the FCM emulator) needs to serve HTTPS that a client verifies
/// the way it verifies FCM's, trusting the authority's certificate as a CA file
/// (`HERALD_CA_FILE`), with host names checked.
///
/// The authority's private key signs this one certificate and is then freed, never written: no
/// other certificate can ever be issued under the authority a client was told to trust. Keys are
/// P-256 and signatures ECDSA with SHA-256, as Google's front ends serve theirs.
///
/// ```swift
/// let made = try LocalServerCertificate()   // 127.0.0.1, ::1 and localhost
/// // serve made.certificatePEM with made.privateKeyPEM; clients trust made.authorityPEM
/// ```
public struct LocalServerCertificate: Sendable {
    /// The authority's certificate (PEM): the file a client trusts.
    public let authorityPEM: String
    /// The server's certificate (PEM), signed by the authority, for `hosts`.
    public let certificatePEM: String
    /// The server certificate's private key (PKCS#8 PEM).
    public let privateKeyPEM: String
    /// The names and addresses the certificate is valid for, as given.
    public let hosts: [String]

    /// The addresses a loopback server is reached at.
    public static let loopbackHosts = ["127.0.0.1", "::1", "localhost"]

    /// Makes the authority and the certificate, valid from an hour ago (a clock a little behind
    /// still accepts it) for `days` days. `hosts` are DNS names (letters, digits, `-`, `.`, a
    /// leading `*.`) or IP addresses (an IPv6 one with or without brackets); each becomes a
    /// subjectAltName entry of its kind.
    public init(hosts: [String] = LocalServerCertificate.loopbackHosts, days: Int = 365) throws(CryptoError) {
        guard !hosts.isEmpty else { throw CryptoError("a server certificate needs at least one host name or address") }
        guard days >= 1 else { throw CryptoError("a server certificate must be valid for at least 1 day, not \(days)") }
        var names: [String] = []
        for host in hosts { names.append(try Self.alternativeName(host)) }

        guard let authorityKey = herald_p256_generate(), let serverKey = herald_p256_generate() else {
            throw CryptoError("P-256 key generation failed")
        }
        defer {
            EVP_PKEY_free(authorityKey)
            EVP_PKEY_free(serverKey)
        }
        let authority = try Self.certificate(commonName: "Herald local authority", publicKey: authorityKey, issuer: nil,
                                             signingKey: authorityKey, days: days,
                                             extensions: [(NID_basic_constraints, "critical,CA:TRUE,pathlen:0"),
                                                          (NID_key_usage, "critical,keyCertSign,cRLSign"),
                                                          (NID_subject_key_identifier, "hash")])
        defer { X509_free(authority) }
        let server = try Self.certificate(commonName: Self.commonName(hosts), publicKey: serverKey, issuer: authority,
                                          signingKey: authorityKey, days: days,
                                          extensions: [(NID_basic_constraints, "critical,CA:FALSE"),
                                                       (NID_key_usage, "critical,digitalSignature"),
                                                       (NID_ext_key_usage, "serverAuth"),
                                                       (NID_subject_key_identifier, "hash"),
                                                       (NID_authority_key_identifier, "keyid:always"),
                                                       (NID_subject_alt_name, names.joined(separator: ","))])
        defer { X509_free(server) }
        authorityPEM = writeToMemoryBIO { PEM_write_bio_X509($0, authority) }
        certificatePEM = writeToMemoryBIO { PEM_write_bio_X509($0, server) }
        privateKeyPEM = writeToMemoryBIO { PEM_write_bio_PrivateKey($0, serverKey, nil, nil, 0, nil, nil) }
        guard !authorityPEM.isEmpty, !certificatePEM.isEmpty, !privateKeyPEM.isEmpty else {
            throw CryptoError("cannot write the certificates as PEM")
        }
        self.hosts = hosts
    }

    /// `IP:address` or `DNS:name` for the subjectAltName list; refuses what is neither, so no
    /// text of a host can change the list's meaning.
    static func alternativeName(_ host: String) throws(CryptoError) -> String {
        var bare = host
        if bare.hasPrefix("[") && bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
        var address = [UInt8](repeating: 0, count: 16)
        if inet_pton(AF_INET, bare, &address) == 1 || inet_pton(AF_INET6, bare, &address) == 1 {
            return "IP:" + bare
        }
        let labels = bare.split(separator: ".", omittingEmptySubsequences: false)
        let valid = !bare.isEmpty && bare.utf8.count <= 253 && labels.enumerated().allSatisfy { index, label in
            if label == "*" { return index == 0 && labels.count > 2 }
            return !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D }
        }
        guard valid else {
            throw CryptoError("'\(host)' is neither an IP address nor a DNS name (letters, digits, '-' and '.'); a certificate cannot name it")
        }
        return "DNS:" + bare
    }

    /// The first DNS name, else the first address: what a person reading the certificate sees.
    static func commonName(_ hosts: [String]) -> String {
        hosts.first { (try? alternativeName($0))?.hasPrefix("DNS:") == true } ?? hosts[0]
    }

    /// One X.509 v3 certificate; self-signed when `issuer` is nil. The caller frees it.
    private static func certificate(commonName: String, publicKey: OpaquePointer, issuer: OpaquePointer?, signingKey: OpaquePointer,
                                    days: Int, extensions: [(Int32, String)]) throws(CryptoError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw CryptoError("X509_new failed") }
        var made = false
        defer { if !made { X509_free(certificate) } }
        // A random positive serial: two runs' certificates never share issuer and serial.
        var serial = Random.bytes(16)
        serial[0] &= 0x7F
        guard let number = BN_bin2bn(&serial, Int32(serial.count), nil) else { throw CryptoError("BN_bin2bn failed") }
        defer { BN_free(number) }
        let subject = X509_get_subject_name(certificate)
        guard X509_set_version(certificate, 2) == 1,  // v3
              BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate)) != nil,
              X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), days * 86_400) != nil,
              X509_set_pubkey(certificate, publicKey) == 1,
              X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
              X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0) } ?? subject) == 1
        else { throw CryptoError("cannot fill in the certificate for \(commonName)") }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw CryptoError("the certificate extension \(String(cString: OBJ_nid2sn(nid))) = \(value) was refused")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(certificate, ext, -1) == 1 else { throw CryptoError("cannot add the extension \(value)") }
        }
        guard X509_sign(certificate, signingKey, EVP_sha256()) > 0 else { throw CryptoError("cannot sign the certificate for \(commonName)") }
        made = true
        return certificate
    }
}
