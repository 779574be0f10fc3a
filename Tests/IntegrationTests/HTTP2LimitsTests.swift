import Emulator
import Foundation
import HTTPClient
import HTTPServer
import Testing
import TestSupport

/// HTTP/2 as Google's front end serves it (the emulator's GOAWAY, stream limit and refused
/// streams) against the client: what the emulator received is what counts.
@Suite struct HTTP2LimitsTests {
    /// Sends `total` messages, one token each, and returns the completions.
    private func sendAll(_ emulator: EmulatorServer, total: Int, caFile: String? = nil, only: [Int]? = nil,
                         configure: (inout HTTPClientConfiguration) -> Void = { _ in }) throws -> [HTTPCompletion] {
        let account = try TestAccount(emulator)
        let accessToken: String
        if let caFile {
            let grant = try account.exchange(try account.assertion(), over: .tlsHTTP1(caFile: caFile))
            accessToken = try #require(grant.json?["access_token"]?.stringValue)
        } else {
            accessToken = try account.accessToken()
        }
        var configuration = HTTPClientConfiguration()
        configuration.caFile = caFile
        configure(&configuration)
        let client = try HTTPClient(configuration: configuration)
        let url = emulator.sendURL(projectID: account.projectID)
        let headers = ["Content-Type: application/json", "Authorization: Bearer \(accessToken)"]
        let tags = only ?? Array(0..<total)
        for tag in tags {
            client.submit(HTTPRequest(url: url, headers: headers, body: Array(tokenMessage("device-\(tag)").utf8)), tag: UInt64(tag))
        }
        return collect(client, count: tags.count, within: 120)
    }

    /// Every token delivered exactly once: nothing lost, nothing twice.
    private func deliveredOnce(_ emulator: EmulatorServer, total: Int) {
        let delivered = emulator.deliveredMessages()
        var perToken: [String: Int] = [:]
        for message in delivered { perToken[message.target, default: 0] += 1 }
        #expect(delivered.count == total, "\(delivered.count) delivered for \(total) sent")
        #expect(perToken.count == total)
        #expect(perToken.values.allSatisfy { $0 == 1 }, "delivered twice: \(perToken.filter { $0.value > 1 }.keys.prefix(5))")
    }

    // Over TLS (h2 by ALPN), as FCM is served: libcurl 7.88 sends the unprocessed streams again by
    // itself, over HTTP/2 (docs/fcm-limits.md).
    @Test func streamsAboveAGoawaysLastStreamGoAgainAndNothingIsDeliveredTwice() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator {
            $0.goawayEvery = .requests(150)
            $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key)
        }
        defer { emulator.stop() }
        let total = 3_000
        let completions = try sendAll(emulator, total: total, caFile: files.certificate)
        #expect(completions.count == total)
        // libcurl 7.88 sends an unprocessed stream again by itself, up to five times per request;
        // one whose retries all met connections being ended fails as a lost connection
        // (docs/fcm-limits.md), and the worker sends it again as it does any lost answer. So here:
        // no answer but 200, a failure only as a lost connection, and those sent once more.
        var failed: [Int] = []
        var texts: [String] = []
        var unprocessed = 0
        for completion in completions {
            switch completion.result {
            case .success(let response): #expect(response.status == 200, "status \(response.status)")
            case .failure(let error):
                #expect(error.kind == .connection || error.kind == .unprocessed, "\(error)")
                if error.kind == .unprocessed { unprocessed += 1 }
                failed.append(Int(completion.tag))
                texts.append("\(error)")
            }
        }
        if !failed.isEmpty {
            print("GOAWAY every 150: \(failed.count) of \(total) requests failed (\(unprocessed) called unprocessed, the rest lost connections: libcurl's retries spent), e.g. \(texts.prefix(2)); sent again")
            let again = try sendAll(emulator, total: total, caFile: files.certificate, only: failed)
            #expect(again.allSatisfy { if case .success(let response) = $0.result { response.status == 200 } else { false } })
        }
        // What counts: at the emulator every message exactly once, none lost, none twice.
        deliveredOnce(emulator, total: total)
        let statistics = emulator.serverStatistics
        // Every 150 HTTP/2 requests on a connection ended it, and some streams were left unprocessed.
        #expect(statistics.goawaysSent >= statistics.http2Requests / 150 - statistics.connectionsAccepted, "\(statistics.goawaysSent) GOAWAYs")
        #expect(statistics.goawaysSent >= 3)
        print("GOAWAY every 150: \(statistics.goawaysSent) GOAWAYs, \(statistics.http2Requests) HTTP/2 and \(statistics.http1Requests) HTTP/1.1 requests, \(statistics.unprocessedStreams) streams unprocessed and sent again, \(statistics.connectionsAccepted) connections, peak \(statistics.peakStreamsPerConnection) streams on one")
    }

    // A worker keeps a window of requests in flight and reuses each curl handle for request
    // after request. libcurl counts its retries on a fresh connection per handle and clears the
    // count only when the handle is reset: a client that kept the count would, once a handle had
    // met five GOAWAYs over its life, fail a request that never reached the server ("Connection
    // died, tried 5 times before giving up"), and the worker would spend an attempt and a backoff
    // on it (docs/fcm-limits.md).
    @Test func handlesReusedThroughManyGoawaysStillSendTheUnprocessedStreamsAgain() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator {
            $0.goawayEvery = .requests(100)
            $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key)
        }
        defer { emulator.stop() }
        let account = try TestAccount(emulator)
        let grant = try account.exchange(try account.assertion(), over: .tlsHTTP1(caFile: files.certificate))
        let accessToken = try #require(grant.json?["access_token"]?.stringValue)
        var configuration = HTTPClientConfiguration()
        configuration.caFile = files.certificate
        let client = try HTTPClient(configuration: configuration)
        let url = emulator.sendURL(projectID: account.projectID)
        let headers = ["Content-Type: application/json", "Authorization: Bearer \(accessToken)"]
        func submit(_ tag: Int) {
            client.submit(HTTPRequest(url: url, headers: headers, body: Array(tokenMessage("device-\(tag)").utf8)), tag: UInt64(tag))
        }
        // 40 in flight through 4,000 requests: each handle carries about a hundred of them.
        let total = 4_000, window = 40
        var next = 0
        while next < window { submit(next); next += 1 }
        var failures: [(tag: Int, text: String)] = []
        var answered = 0
        let deadline = Date().addingTimeInterval(180)
        while answered < total && Date() < deadline {
            for completion in client.poll(timeoutMilliseconds: 100) {
                answered += 1
                switch completion.result {
                case .success(let response) where response.status == 200: break
                case .success(let response): failures.append((Int(completion.tag), "status \(response.status)"))
                case .failure(let error): failures.append((Int(completion.tag), error.kind == .unprocessed ? "unprocessed: \(error)" : "\(error)"))
                }
                if next < total { submit(next); next += 1 }
            }
        }
        #expect(answered == total, "\(answered) of \(total) answered")
        // libcurl 7.88 ends a few requests a GOAWAY left unprocessed with "Error in the HTTP2
        // framing layer" (8.14 none; docs/fcm-limits.md): with it, those alone may fail, and the
        // client must call them unprocessed (the worker sends them again without an attempt);
        // they must not have reached the emulator (checked below: each message once in all,
        // after they are sent again). Nothing else may fail with any libcurl.
        let libcurl7 = HTTPClient.libraryVersion.hasPrefix("libcurl/7.")
        let framing = failures.filter { libcurl7 && $0.text.contains("HTTP2 framing layer") }
        #expect(failures.count == framing.count, "\(failures.count) failed, e.g. \(failures.prefix(3).map(\.text))")
        #expect(framing.allSatisfy { $0.text.hasPrefix("unprocessed: ") }, "not called unprocessed: \(framing.filter { !$0.text.hasPrefix("unprocessed: ") }.prefix(3).map(\.text))")
        if !framing.isEmpty {
            let again = try sendAll(emulator, total: total, caFile: files.certificate, only: framing.map(\.tag))
            #expect(again.allSatisfy { if case .success(let response) = $0.result { response.status == 200 } else { false } })
        }
        deliveredOnce(emulator, total: total)
        let statistics = emulator.serverStatistics
        #expect(statistics.goawaysSent >= 30, "\(statistics.goawaysSent) GOAWAYs")
        print("GOAWAY every 100, 40 in flight: \(statistics.goawaysSent) GOAWAYs, \(statistics.connectionsAccepted) connections, \(failures.count) of \(total) failed (\(framing.count) in the HTTP/2 framing layer), with \(HTTPClient.libraryVersion)")
    }

    @Test func refusedStreamsGoAgainAndNothingIsDeliveredTwice() throws {
        let files = try makeCertificate()
        defer { try? FileManager.default.removeItem(atPath: files.directory) }
        let emulator = try startEmulator {
            $0.refuseEveryStream = 7
            $0.tls = .init(certificateFile: files.certificate, privateKeyFile: files.key)
        }
        defer { emulator.stop() }
        let total = 1_000
        let completions = try sendAll(emulator, total: total, caFile: files.certificate)
        #expect(completions.count == total)
        let failures = completions.compactMap { completion -> String? in
            switch completion.result {
            case .success(let response): return response.status == 200 ? nil : "status \(response.status)"
            case .failure(let error): return "\(error)"
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failed, e.g. \(failures.prefix(3))")
        deliveredOnce(emulator, total: total)
        let refused = emulator.serverStatistics.refusedStreams
        #expect(refused >= 1, "no stream was refused")
        #expect(emulator.statistics["refused_streams"]?.intValue == refused)
        print("REFUSED_STREAM every 7th stream: \(refused) refused, every message delivered once")
    }

    @Test func atMostTheServersStreamsRunOnOneConnection() throws {
        // The emulator announces 100 (FCM's limit); the client would allow 250 on a connection.
        let emulator = try startWorkerEmulator {
            $0.latencyMilliseconds = 200
            $0.threads = 2
        }
        defer { emulator.stop() }
        let total = 1_000
        let completions = try sendAll(emulator, total: total, caFile: try TestTLS.caFile()) {
            $0.maxStreamsPerConnection = 250
            $0.connections(toCarry: 1_000)
        }
        #expect(completions.count == total)
        #expect(completions.allSatisfy { (try? $0.result.get().status) == 200 })
        deliveredOnce(emulator, total: total)
        let statistics = emulator.serverStatistics
        #expect(statistics.peakStreamsPerConnection <= 100, "peak \(statistics.peakStreamsPerConnection) streams on one connection")
        print("server allows 100, client 250: peak \(statistics.peakStreamsPerConnection) streams on one connection, \(statistics.refusedStreams) refused, \(statistics.connectionsAccepted) connections")
    }

    @Test func goawayEveryParsesRequestsAndSeconds() throws {
        #expect(try GoawayEvery(parsing: "1000") == .requests(1000))
        #expect(try GoawayEvery(parsing: "30s") == .seconds(30))
        for bad in ["0", "-5", "x", "30m", "0s", ""] {
            #expect(throws: GoawayEvery.ParseError.self) { try GoawayEvery(parsing: bad) }
        }
        let scenario = try Scenario.parse(#"{"goaway_every": "2.5s"}"#)
        #expect(scenario.goawayEvery == .seconds(2.5))
        #expect(try Scenario.parse(#"{"goaway_every": 500}"#).goawayEvery == .requests(500))
        #expect(throws: Scenario.ParseError.self) { try Scenario.parse(#"{"goaway_every": 0}"#) }
        let options = try #require(try EmulatorCommand.Options.parse(["--goaway-every", "1000", "--max-streams", "50", "--refuse-every", "9"]))
        #expect(options.configuration.goawayEvery == .requests(1000))
        #expect(options.configuration.maxConcurrentStreams == 50)
        #expect(options.configuration.refuseEveryStream == 9)
        #expect(throws: EmulatorError.self) { try EmulatorCommand.Options.parse(["--goaway-every", "soon"]) }
    }
}
