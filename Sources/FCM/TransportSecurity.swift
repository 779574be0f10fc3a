import Foundation

/// Credentials travel only over TLS: the service account's signed grant goes to the key's
/// `token_uri`, and the access token it buys goes to FCM and Instance ID with every request. A
/// plain `http://` URL for any of them is refused when it leaves the machine; a loopback host
/// (a local emulator or stand-in) is allowed, and so is any host with `--allow-insecure-transport`
/// (HERALD_ALLOW_INSECURE_TRANSPORT), which is warned about once at start.
public enum TransportSecurity {
    public static let flag = "--allow-insecure-transport"
    public static let environmentVariable = "HERALD_ALLOW_INSECURE_TRANSPORT"

    /// Whether `environment` allows plain http to other hosts (1, true, yes or on).
    public static func allowsInsecure(_ environment: [String: String]) -> Bool {
        guard let value = environment[environmentVariable] else { return false }
        return ["1", "true", "yes", "on"].contains(value.lowercased())
    }

    /// 127.0.0.0/8, ::1 and localhost: a request to these never leaves the machine.
    public static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name = String(name.dropLast()) }
        if name == "localhost" || name == "::1" || name == "0:0:0:0:0:0:0:1" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && Int(part)! <= 255
        }
    }

    /// The host of `url` when the URL would carry credentials in clear text to another machine:
    /// its scheme is not https and its host is not loopback. nil when it is safe. A URL whose
    /// host cannot be read counts as leaving the machine (its own checks name what is wrong).
    public static func cleartextHost(_ url: String) -> String? {
        let trimmed = url.trimmingCharacters(in: .whitespaces)
        if trimmed.lowercased().hasPrefix("https://") { return nil }
        let host = URLComponents(string: trimmed)?.host ?? ""
        if !host.isEmpty && isLoopback(host: host) { return nil }
        return host.isEmpty ? "(no host)" : host
    }

    /// Why `url`, the value of `setting`, may not carry credentials, with what to do; nil when it
    /// may (https, a loopback host, or `allowed`).
    public static func refusal(_ url: String, setting: String, allowed: Bool) -> String? {
        guard !allowed, let host = cleartextHost(url) else { return nil }
        return "\(setting) is \(url): plain http to \(host), which would send the service account's credentials (its access token) unencrypted; use https, or a loopback host (127.0.0.1, ::1, localhost) for a local emulator, or pass \(flag) (\(environmentVariable)=1) if the network in between is trusted"
    }

    /// The same for a key file's `token_uri`, naming the file (or `env:VAR`).
    public static func tokenURIRefusal(_ account: ServiceAccount, source: String, allowed: Bool) -> String? {
        guard !allowed, let host = cleartextHost(account.tokenURI) else { return nil }
        return "the key \(source) has token_uri \(account.tokenURI): plain http to \(host), which would send its signed grant and receive the access token unencrypted; use a key whose token_uri is https (Google's is https://oauth2.googleapis.com/token), or pass \(flag) (\(environmentVariable)=1) if the network in between is trusted"
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}

/// A key file others may read: warned about (as ssh warns about a private key), naming the file.
public enum KeyFilePermissions {
    /// A warning when `path` is readable (or writable) by its group or others; nil otherwise or
    /// when it cannot be read (reading it reports that).
    public static func warning(path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 != 0 else { return nil }
        return "the key file \(path) may be read by \(mode & 0o007 != 0 ? "any user" : "its group") (mode \(String(mode, radix: 8))): a private key should be readable by its owner only; run chmod 600 \(path)"
    }
}
