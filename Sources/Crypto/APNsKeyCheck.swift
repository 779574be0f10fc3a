import COpenSSL

/// What Apple's token-based authentication needs of a key file (`AuthKey_KEYID.p8`): an
/// unencrypted PKCS#8 PEM private key (`BEGIN PRIVATE KEY`) on the P-256 curve, the key ES256
/// signs with. Used by `herald apns add` and `herald apns test` before any pool sends with it;
/// the answer names what is wrong and never quotes the key.
public enum APNsKeyCheck {
    /// Nil when `pem` is such a key; otherwise why not, in words.
    public static func problem(pem: [UInt8]) -> String? {
        let text = String(decoding: pem, as: UTF8.self)
        guard text.contains("-----BEGIN PRIVATE KEY-----") else {
            if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
                return "the key is encrypted with a passphrase; give the .p8 file as Apple issued it (unencrypted PKCS#8)"
            }
            if text.contains("-----BEGIN EC PRIVATE KEY-----") {
                return "the key is in the SEC1 form (BEGIN EC PRIVATE KEY), not PKCS#8; give the .p8 file as Apple issued it (BEGIN PRIVATE KEY)"
            }
            return "not a PEM PKCS#8 private key (no BEGIN PRIVATE KEY line); give the .p8 file Apple issued for the key"
        }
        var bytes = pem
        let key: OpaquePointer? = bytes.withUnsafeMutableBytes { raw -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        ERR_clear_error()
        guard let key else { return "the PEM text does not hold a readable private key" }
        defer { EVP_PKEY_free(key) }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else {
            return "the private key is not an elliptic-curve key (APNs keys are P-256)"
        }
        var name = [CChar](repeating: 0, count: 80)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else {
            return "the elliptic-curve key's curve cannot be read"
        }
        let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == "prime256v1" || curve == "P-256" else {
            return "the key is on curve \(curve), not P-256 (prime256v1) as APNs keys are"
        }
        return nil
    }
}
