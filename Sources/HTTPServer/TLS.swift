import COpenSSL
import Glibc

/// One OpenSSL server context (certificate, key, ALPN choice) shared by every connection.
final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer

    init(files: HTTPServer.TLSFiles) throws(HTTPServerError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw HTTPServerError("SSL_CTX_new failed: \(TLSContext.drainErrors())")
        }
        // Every stored property is set from here on, so a throw below still runs deinit, which frees the context.
        self.context = context
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        // Partial writes and a moving buffer: the connection's output buffer may grow or be
        // compacted between a write that wanted to retry and the retry.
        _ = herald_ssl_ctx_set_mode(context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS))
        guard SSL_CTX_use_certificate_chain_file(context, files.certificateFile) == 1 else {
            let reason = TLSContext.drainErrors()
            throw HTTPServerError("cannot load the TLS certificate '\(files.certificateFile)': \(reason); give a PEM certificate chain")
        }
        guard SSL_CTX_use_PrivateKey_file(context, files.privateKeyFile, SSL_FILETYPE_PEM) == 1 else {
            let reason = TLSContext.drainErrors()
            throw HTTPServerError("cannot load the TLS private key '\(files.privateKeyFile)': \(reason); give a PEM private key")
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw HTTPServerError("the TLS private key '\(files.privateKeyFile)' does not match the certificate '\(files.certificateFile)'")
        }
        SSL_CTX_set_alpn_select_cb(context, { _, out, outLength, offered, offeredLength, _ in
            // Prefer h2, then http/1.1; with neither, go on without ALPN (the connection speaks HTTP/1.1).
            guard let offered, let out, let outLength else { return SSL_TLSEXT_ERR_NOACK }
            var chosen: (Int, UInt8)? = nil
            var index = 0
            let total = Int(offeredLength)
            while index < total {
                let length = Int(offered[index])
                let start = index + 1
                guard start + length <= total else { break }
                if length == 2, offered[start] == UInt8(ascii: "h"), offered[start + 1] == UInt8(ascii: "2") {
                    chosen = (start, 2)
                    break
                }
                if length == 8, chosen == nil,
                   memcmp(offered + start, "http/1.1", 8) == 0 {
                    chosen = (start, 8)
                }
                index = start + length
            }
            guard let (start, length) = chosen else { return SSL_TLSEXT_ERR_NOACK }
            out.pointee = offered + start
            outLength.pointee = length
            return SSL_TLSEXT_ERR_OK
        }, nil)
    }

    deinit { SSL_CTX_free(context) }

    static func drainErrors() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            parts.append(String(decoding: text, as: UTF8.self))
        }
        return parts.isEmpty ? "unknown OpenSSL error" : parts.joined(separator: "; ")
    }
}

/// The OpenSSL side of one connection.
struct TLSSession {
    let ssl: OpaquePointer

    init?(context: TLSContext, fd: Int32) {
        guard let ssl = SSL_new(context.context) else { return nil }
        self.ssl = ssl
        SSL_set_fd(ssl, fd)
        SSL_set_accept_state(ssl)
    }

    func free() { SSL_free(ssl) }

    enum Progress { case done, wantRead, wantWrite, failed }

    func handshake() -> Progress {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 { return .done }
        return classify(rc)
    }

    /// "h2", "http/1.1" or nil when the client offered no protocol we speak.
    var negotiatedProtocol: String? {
        var data: UnsafePointer<UInt8>? = nil
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    enum IOResult { case bytes(Int), wantRead, wantWrite, closed, failed }

    func read(_ buffer: UnsafeMutableRawPointer, _ capacity: Int) -> IOResult {
        ERR_clear_error()
        return result(of: SSL_read(ssl, buffer, Int32(capacity)))
    }

    func write(_ buffer: UnsafeRawPointer, _ count: Int) -> IOResult {
        ERR_clear_error()
        return result(of: SSL_write(ssl, buffer, Int32(count)))
    }

    /// What an SSL_read or SSL_write return value means for the event loop.
    private func result(of n: Int32) -> IOResult {
        if n > 0 { return .bytes(Int(n)) }
        switch SSL_get_error(ssl, n) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        default: return .failed
        }
    }

    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    private func classify(_ rc: Int32) -> Progress {
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default: return .failed
        }
    }
}
