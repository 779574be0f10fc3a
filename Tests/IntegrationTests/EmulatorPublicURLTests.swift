import Emulator
import Foundation
import JSON
import Testing
import TestSupport

/// `--public-url`: the address clients use when it is not where the emulator listens (a
/// container name in docker-compose). Written service accounts point their token_uri there, and
/// grants addressed to it are accepted.
@Suite struct EmulatorPublicURLTests {
    @Test func serviceAccountsPointAtThePublicURL() throws {
        // Cleartext, asked for: the public URL is http.
        let options = try #require(try EmulatorCommand.Options.parse(["--port", "0", "--tls", "off", "--public-url", "http://emulator:8085/"]))
        #expect(options.configuration.publicURL == "http://emulator:8085/")
        let server = EmulatorServer(configuration: options.configuration)
        try server.start()
        defer { server.stop() }
        #expect(server.baseURL == "http://emulator:8085")
        let account = try JSONValue.parse(try server.serviceAccountJSON(projectID: "compose"))
        #expect(account["token_uri"]?.stringValue == "http://emulator:8085/token")
        #expect(throws: EmulatorError.self) { try EmulatorCommand.Options.parse(["--public-url", "emulator:8085"]) }
        // By default it serves HTTPS: an http:// public URL would send clients to a port they cannot read.
        #expect(throws: EmulatorError.self) { try EmulatorCommand.Options.parse(["--public-url", "http://emulator:8085/"]) }
        let secure = try #require(try EmulatorCommand.Options.parse(["--port", "0", "--public-url", "https://emulator:8085/"]))
        #expect(secure.configuration.publicURL == "https://emulator:8085/")
    }
}
