import Crypto
import Foundation
import JSON

/// A Google service-account key file: who signs the OAuth2 grants, with which key, and where
/// they are exchanged for access tokens.
public struct ServiceAccount: Sendable {
    public var projectID: String
    public var clientEmail: String
    /// Where grants go; the file's `token_uri`, so a local stand-in can serve it.
    public var tokenURI: String
    public var privateKey: RSAPrivateKey

    public init(projectID: String, clientEmail: String, tokenURI: String, privateKey: RSAPrivateKey) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.tokenURI = tokenURI
        self.privateKey = privateKey
    }

    /// Google's token endpoint, for a file without `token_uri`.
    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    /// Reads and parses the JSON key file at `path`.
    public static func load(path: String) throws(ServiceAccountError) -> ServiceAccount {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ServiceAccountError(path: path, problem: "the file does not exist")
        }
        guard !isDirectory.boolValue else { throw ServiceAccountError(path: path, problem: "it is a directory, not a JSON key file") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServiceAccountError(path: path, problem: "the file cannot be read (check its permissions)")
        }
        return try parse(json: [UInt8](data), path: path)
    }

    /// Parses a key file's contents; `path` only names it in errors.
    public static func parse(json: [UInt8], path: String) throws(ServiceAccountError) -> ServiceAccount {
        let document: JSONValue
        do {
            document = try JSONValue.parse(json)
        } catch {
            // Only the offset: the reason might quote the input, which holds the private key.
            throw ServiceAccountError(path: path, problem: "the file is not JSON (invalid at byte \(error.offset))")
        }
        guard document.objectValue != nil else {
            throw ServiceAccountError(path: path, problem: "the file holds a JSON \(document.typeName), not an object")
        }
        func field(_ name: String) throws(ServiceAccountError) -> String {
            guard let value = document[name] else {
                throw ServiceAccountError(path: path, problem: "the field \"\(name)\" is missing")
            }
            guard let text = value.stringValue, !text.isEmpty else {
                throw ServiceAccountError(path: path, problem: "the field \"\(name)\" must be a non-empty string")
            }
            return text
        }
        let type = try field("type")
        guard type == "service_account" else {
            throw ServiceAccountError(path: path, problem: "\"type\" is \"\(type.prefix(40))\", not \"service_account\" (is this a service-account key file?)")
        }
        let projectID = try field("project_id")
        let clientEmail = try field("client_email")
        let pem = try field("private_key")
        let tokenURI = document["token_uri"] == nil ? googleTokenURI : try field("token_uri")
        guard pem.contains("-----BEGIN"), let key = try? RSAPrivateKey(pem: pem) else {
            throw ServiceAccountError(path: path, problem: "\"private_key\" is not a PEM RSA private key")
        }
        return ServiceAccount(projectID: projectID, clientEmail: clientEmail, tokenURI: tokenURI, privateKey: key)
    }
}

/// Why a service-account file cannot be used; names the file, never quotes key material.
public struct ServiceAccountError: Error, Sendable, CustomStringConvertible {
    public var path: String
    public var problem: String

    public init(path: String, problem: String) {
        self.path = path
        self.problem = problem
    }

    public var description: String { "service account file \(path): \(problem)" }
}
