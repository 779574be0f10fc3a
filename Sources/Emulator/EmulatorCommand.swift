import CommandOptions
import FCM
import Glibc
import HTTPServer
import JSON

/// `herald emulator`: parses its flags, runs an `EmulatorServer` until SIGINT or SIGTERM.
public enum EmulatorCommand {
    /// Its flags, in the vocabulary every herald command shares.
    public static let options: [Option] = [
        Option(name: "host", env: "HERALD_EMULATOR_HOST", value: "ADDRESS", help: "Address to listen on.", defaultText: "127.0.0.1"),
        Option(name: "port", env: "HERALD_EMULATOR_PORT", value: "PORT", help: "Port to listen on, 0 for any free one.", defaultText: "8085"),
        Option(name: "threads", value: "N", help: "Event-loop threads (1 to 64).", defaultText: "2"),
        Option(name: "accept-mode", value: "MODE",
               help: "acceptor (one thread accepts and deals connections out round-robin) or reuseport (a listener per thread).",
               defaultText: "acceptor"),
        Option(name: "latency-ms", value: "N", help: "Answer every send N milliseconds late.", defaultText: "0"),
        Option(name: "quota", value: "N/s|N/min",
               help: "The project's quota, a number of messages a minute (300/s and 18000/min are the same; FCM's default is 600000/min), counted as --quota-window says. Beyond it 429 in the shape --quota-answer says (overrides the scenario's quota)."),
        Option(name: "quota-window", value: "MODEL",
               help: "How the project's quota is counted: minute (as FCM documents it: windows of 60 s, not aligned to the clock, each starting at the first counted request; every counted request inside it counts, 4xx answers too, 429s not; a spent window refuses every send until it ends) or continuous (a bucket of a minute's worth refilled continuously at the stated rate: after a burst, the stated rate goes through).",
               defaultText: "minute"),
        Option(name: "quota-burst", value: "N", help: "Make the continuous quota's bucket hold N messages instead of a minute's worth (with --quota-window continuous)."),
        Option(name: "quota-start", value: "N", help: "What the quota allows at the start (with --quota; default all of it): what the continuous bucket holds, or what is left of a minute window that runs from start-up."),
        Option(name: "quota-answer", value: "SHAPE",
               help: "How every limit words its 429: production (as FCM: the project quota's RATE_LIMIT_EXCEEDED body stating the limit, no Retry-After; a device's or topic's limit with FcmError QUOTA_EXCEEDED and a QuotaFailure naming it) or legacy (the emulator's older answers: QuotaFailure project:ID / device:TOKEN / topic:NAME, Retry-After on each).",
               defaultText: "production"),
        Option(name: "fcm-limits",
               help: "Enforce FCM's per-device limits: 240 messages a minute and 5,000 an hour to one token; collapsible messages a burst of 20, then one every 3 minutes. Beyond them 429 QUOTA_EXCEEDED naming the device."),
        Option(name: "topic-limit", value: "N/min", help: "At most N messages a minute to one topic; beyond it 429 QUOTA_EXCEEDED naming the topic."),
        Option(name: "capacity", value: "N/s",
               help: "Serve at most N sends a second; past that requests queue and their answers slow down, as an overloaded server's do."),
        Option(name: "max-streams", value: "N",
               help: "SETTINGS_MAX_CONCURRENT_STREAMS of every HTTP/2 connection (1 to 100000); a stream opened beyond it is answered with RST_STREAM REFUSED_STREAM, unprocessed.",
               defaultText: "100, as FCM"),
        Option(name: "goaway-every", value: "N|Ns",
               help: "End every HTTP/2 connection with a GOAWAY after N requests on it (1000) or once it is N seconds old (30s), as Google's front ends do: streams above its last-stream-id are not processed, the rest are answered, then the connection is closed (overrides the scenario's goaway_every)."),
        Option(name: "refuse-every", value: "N", help: "Refuse every Nth stream of each HTTP/2 connection with RST_STREAM REFUSED_STREAM, unprocessed (fault injection)."),
        Option(name: "scenario", value: "FILE", help: "JSON scenario: scripts per token prefix, random errors, latency, a project quota (format below)."),
        Option(name: "write-service-account", value: "[PROJECT_ID=]FILE", repeatable: true,
               help: "Generate a service account (fresh RSA key) whose token_uri is this emulator and write it to FILE (mode 0600), for project PROJECT_ID (default: --project-id). Repeat it for several projects (herald projects add, one key each); the first is the one printed for workers. Without it (and without --service-account) one is written to a private temporary folder and removed when the emulator stops."),
        Option(name: "write-service-accounts", value: "N=DIR",
               help: "Generate N service accounts (1 to 100000), for projects herald-project-1 ... herald-project-N, and write each to DIR/<project>.json (mode 0600; DIR must exist): one pool for many projects, tested and measured (herald projects add, one file each). They share one RSA key, so a thousand take moments."),
        Option(name: "project-id", value: "ID", help: "Project of the written service account.", defaultText: "herald-emulator"),
        Option(name: "service-account", value: "FILE", repeatable: true, help: "Also accept JWTs of an existing service-account file."),
        Option(name: "service-accounts", value: "DIR", repeatable: true,
               help: "Also accept JWTs of every service-account file in DIR (*.json), such as the keys an earlier run wrote with --write-service-accounts: give the same --port (or --public-url), which their token_uri names."),
        Option(name: "write-apns-key", value: "DIR",
               help: "Generate an APNs signing key (P-256) for the app --apns-topic and write it as Apple hands keys out, DIR/AuthKey_<KEYID>.p8 (mode 0600; DIR must exist; a line above the key says its key ID, team ID and topic); the herald apns add line that registers it is printed, and its provider tokens are accepted on /3/device/{token}."),
        Option(name: "apns-keys", value: "DIR",
               help: "Also accept the provider tokens of every DIR/AuthKey_<KEYID>.p8 (keys written by an earlier run: each for the team and topic it was written for; another key for --apns-team-id and --apns-topic)."),
        Option(name: "apns-team-id", value: "TEAM", help: "Team ID of the APNs keys written or loaded.", defaultText: "HERALDTEAM"),
        Option(name: "apns-topic", value: "BUNDLE_ID",
               help: "The app (bundle ID) the APNs keys written or loaded are for: a push whose apns-topic is another app's gets 400 TopicDisallowed.", defaultText: "com.example.shop"),
        Option(name: "tls", value: "MODE",
               help: "auto: serve HTTPS (h2 and HTTP/1.1 by ALPN, as FCM) with a certificate made for this run, for 127.0.0.1, ::1, localhost, --host and the host of --public-url, signed by an authority made for it alone; the authority's certificate goes to a private temporary folder, removed when the emulator stops (--write-ca FILE for a path that stays), and is printed as HERALD_CA_FILE for workers. off: cleartext (h2c with prior knowledge, and HTTP/1.1), for those who ask for it: a worker speaks HTTP/1.1 to it, a road production never takes. --tls-cert and --tls-key serve a certificate of yours instead.",
               defaultText: "auto"),
        Option(name: "write-ca", value: "FILE",
               help: "With --tls auto: also write the authority's certificate to FILE (mode 0644; a file there is replaced whole, and kept when the emulator stops) and print FILE as HERALD_CA_FILE, for a worker that cannot read the private folder (another container sharing a volume, a service started apart). The certificate is made anew at each start: a worker started before it reads the new one only when restarted."),
        Option(name: "tls-cert", value: "FILE", help: "Serve HTTPS with this PEM certificate chain (with --tls-key)."),
        Option(name: "tls-key", value: "FILE", help: "The private key of --tls-cert."),
        Option(name: "token-lifetime", value: "SECONDS", help: "expires_in of issued access tokens.", defaultText: "3600"),
        Option(name: "token-bytes", value: "N", help: "Length of issued access tokens in bytes (64 to 8192). Google's service-account tokens are about 1,000 bytes; the default, about 50, keeps tests' logs short.", defaultText: "about 50"),
        Option(name: "public-url", value: "URL",
               help: "The URL clients reach this emulator at, when it differs from where it listens (e.g. https://emulator:8085 in docker-compose; https while it serves HTTPS); used in token_uri of written accounts, and with --tls auto its host is named in the certificate."),
        Option(name: "max-stored-messages", value: "N", help: "Delivered messages kept for /emulator/messages.", defaultText: "1000000"),
        Option(name: "delivery-day", value: "YYYY-MM-DD",
               help: "FCM's Data API: count the messages accepted for this day instead of today (an America/Los_Angeles day); POST /emulator/delivery-data {\"day\": ...} changes it while running."),
        Option(name: "delivery-shares", value: "JSON",
               help: "FCM's Data API: what each entry's data holds beside countMessagesAccepted, in FCM's shape, e.g. '{\"messageOutcomePercents\": {\"delivered\": 90, \"pending\": 10}}'.",
               defaultText: "every message delivered without delay"),
        Option(name: "delivery-page-size", value: "N", help: "FCM's Data API: at most N entries a page, whatever the client asks (to see its paging).", defaultText: "as asked"),
        Option(name: "delivery-denied", value: "PROJECT_ID", repeatable: true,
               help: "FCM's Data API: answer 403 PERMISSION_DENIED (the key lacks fcmdata.deliverydata.list) for this project."),
    ]

    public static let help = helpText(
        command: "emulator",
        summary: """
        Runs a local stand-in for Firebase Cloud Messaging: the HTTP v1 send API, the OAuth2 token
        endpoint, device groups, fault injection and observation endpoints. It serves HTTPS by
        default, as FCM does (h2 or HTTP/1.1 by ALPN on one port), with a certificate it makes
        for the run; the lines it prints at start-up hand a worker its URL, a service account and
        the authority to trust (HERALD_CA_FILE). --tls off serves cleartext (h2c prior knowledge
        and HTTP/1.1) for those who ask for it.
        """,
        usage: "[options]", options: options,
        footer: """
        ENDPOINTS:
          POST /token                               OAuth2 jwt-bearer grant
          POST /v1/projects/{project}/messages:send send one message (validated as FCM does); with
                                                    "validate_only": true it answers without delivering
                                                    (counted in /emulator/stats, not in /emulator/messages)
          POST /fcm/notification                    device groups: create, add, remove
          GET  /fcm/notification?notification_key_name=NAME
          POST /iid/v1:batchAdd, /iid/v1:batchRemove topic subscriptions {"to": "/topics/NAME",
                                                    "registration_tokens": [...]} (1 to 1,000); a
                                                    topic message then reaches every subscribed token.
                                                    Per token: fail-unregistered... NOT_FOUND,
                                                    fail-invalid... INVALID_ARGUMENT, fail-internal-K...
                                                    INTERNAL; fail-unavailable-N... refuses the whole
                                                    request once with 503 and Retry-After: N
          POST /3/device/{token}                    APNs's provider API: an ES256 provider token of a
                                                    key it knows (--write-apns-key, --apns-keys), at
                                                    most an hour old and renewed no sooner than 20
                                                    minutes on a connection; the topic its push type
                                                    needs, Apple's priorities, payload limits (4,096
                                                    bytes; 5,120 voip); answers as Apple (docs/apns.md)
                                                    and a topic of the key's app (--apns-topic), else
                                                    400 TopicDisallowed.
                                                    APNs fault tokens (hex): fa110410... 410 Unregistered,
                                                    fa11e410... 410 ExpiredToken, fa110400... 400
                                                    BadDeviceToken, fa11d400... 400
                                                    DeviceTokenNotForTopic, fa11b400... 400
                                                    TopicDisallowed, fa110429K... 429 TooManyRequests,
                                                    fa110503K... 503, fa110500K... 500 on the first K
                                                    attempts (K hex, 0: always)
          POST /webpush/subscriptions               Web Push: a subscription as a browser's
                                                    PushSubscription.toJSON(); body (optional)
                                                    {"mode": "standard"|"apple"|"constrained",
                                                    "fault": "404"|"410"|"429"|"5xx", "failures": K,
                                                    "retry_after": S, "application_server_key": K}
          POST /webpush/push/{id}                   a push: VAPID (RFC 8292; apple mode: Apple's
                                                    subject rules, 403 BadJwtToken), TTL required,
                                                    aes128gcm decrypted; 201 with Location; 413 above
                                                    4,096 bytes (3,070 constrained) (docs/webpush.md)
          GET  /emulator/webpush/messages[?subscription=ID][&limit=N]
          GET  /emulator/messages[?token=T|topic=T|condition=C][&limit=N]
                                                    FCM's messages; with token=T or no filter, the APNs
                                                    pushes too ("provider": "apns")
          GET  /emulator/apns/messages[?token=HEX][&limit=N]  the APNs pushes alone
          GET  /emulator/refusals[?limit=N]         the quota answers (429) given, oldest first: target,
                                                    limit (project, device, topic, ...), time
          DELETE /emulator/messages                 forget messages, counters, fault attempts
          GET  /emulator/stats                      counts, rates, streams, Retry-After violations,
                                                    GOAWAYs sent, refused and unprocessed streams,
                                                    the project's quota and how it is counted
          GET  /v1beta1/projects/{project}/androidApps/{app}/deliveryData?pageSize=N&pageToken=T
                                                    FCM's Data API, from what it received: every
                                                    message that reached a device counted for its
                                                    project, day and analytics label (each app asked
                                                    of a project gets all its counts); the OAuth
                                                    scope cloud-platform is required, as FCM's
          GET|POST /emulator/delivery-data          what the Data API answers: {"day": "YYYY-MM-DD"
                                                    | null, "data": {FCM's data}, "label_data":
                                                    {"label": {...}}, "page_size": N | null,
                                                    "denied": [project], "disabled": [project]};
                                                    GET shows it with the counts and list_requests

        FAULT TOKENS (the message's token; attempts are counted per exact token):
          fail-unregistered...   404 UNREGISTERED            fail-invalid...   400 INVALID_ARGUMENT
          fail-mismatch...       403 SENDER_ID_MISMATCH      fail-auth...      401 THIRD_PARTY_AUTH_ERROR
          fail-quota-N...        429 QUOTA_EXCEEDED, Retry-After: N, on the first attempt, then success
          fail-unavailable-N...  503 UNAVAILABLE, Retry-After: N, on the first attempt, then success
          fail-internal-K...     500 INTERNAL on the first K attempts, then success
          fail-quota, fail-unavailable, fail-internal (no number): fail on every attempt,
                                 without Retry-After

        LIMITS (--quota, --fcm-limits, --topic-limit, or the scenario's "quota" and "limits"):
          Every answer but a 429 counts against the quota (4xx included, as FCM counts them);
          refused sends count against no limit. The project's quota is counted as FCM documents
          it (--quota-window minute, the default): a window of 60 s starts at the first counted
          request, not aligned to the clock; once it holds the quota, every send is refused until
          it ends, and the next counted request starts the next window. --quota-window continuous
          counts it in a bucket of a minute's worth (--quota-burst for less) refilled continuously
          at the stated rate. The start-up line and /emulator/stats ("quota") say which is used.
          As FCM answers (--quota-answer production, the default), the project's quota refuses
          with
            429 {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Quota exceeded
            for quota metric 'Send requests' and limit 'Send requests per minute' ...", "details":
            [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RATE_LIMIT_EXCEEDED",
              "metadata": {"quota_limit": "SendsPerMinutePerProject", "quota_unit": "1/min/{project}",
                           "quota_limit_value": "<the quota a minute>", "consumer": "projects/<number>", ...}},
             {"@type": "type.googleapis.com/google.rpc.Help", ...}]}}
          without Retry-After, FcmError or QuotaFailure; a device's or a topic's limit with an
          FcmError QUOTA_EXCEEDED and a google.rpc.QuotaFailure whose violation's subject is
          "device:TOKEN" or "topic:NAME", without Retry-After. --quota-answer legacy (scenario
          "quota_answer": "legacy"): 429 QUOTA_EXCEEDED with a QuotaFailure subject "project:ID",
          "device:TOKEN" or "topic:NAME" and Retry-After (whole seconds until the limit allows one:
          for a minute window, until it ends).
          FCM's default quota: --quota 600000/min (or a scenario's "quota": {"per_minute":
          600000}); with --quota-start 0, a project whose window is already spent at start-up
          (refused for its first minute; with --quota-window continuous, an empty bucket that
          refills from the first request on).
          --capacity N/s: one first-in first-out serving line; a message's time in
          /emulator/messages is when it was served.

        HTTP/2 AS GOOGLE SERVES IT:
          every connection announces SETTINGS_MAX_CONCURRENT_STREAMS 100 (--max-streams); a
          stream beyond it gets RST_STREAM REFUSED_STREAM. --goaway-every 1000 (or 30s) ends each
          connection after 1,000 requests (or 30 s) with GOAWAY NO_ERROR: its last-stream-id is
          the request that reached the mark, streams the client opened after it are dropped
          unprocessed (safe to send again), the ones up to it are answered, then the emulator
          closes its side. /emulator/stats: goaways_sent, refused_streams, unprocessed_streams,
          peak_streams_per_connection.

        SCENARIO FILE:
          {"seed": 42, "latency_ms": 20 | {"min": 5, "max": 50}, "error_rate": 0.02,
           "random_errors": [{"error": "UNAVAILABLE", "retry_after": 1}],
           "quota": {"per_minute": 600000, "window": "minute" | "continuous", "burst": 10000,
                     "start": 0},  (burst: continuous only)
           "quota_answer": "production" | "legacy",
           "limits": {"device_per_minute": 240, "device_per_hour": 5000, "collapsible_burst": 20,
                      "collapsible_every_seconds": 180, "topic_per_minute": 600},
           "capacity_per_second": 2000, "goaway_every": 1000 | "30s",
           "scripts": [{"prefix": "flaky-", "answers": [{"error": "INTERNAL"}, "success"],
                        "then": "success"},
                       {"prefix": "hot-", "answers": [{"error": "QUOTA_EXCEEDED", "quota": "device"}]}]}
          "quota" of a scripted QUOTA_EXCEEDED: project (default), device, topic, none (no
          QuotaFailure detail), legacy-device, legacy-topic (legacy-style error names), or
          rate-limit (the project quota's production body; "quota_limit_value": N or "TEXT" sets
          what it states, default the scenario's quota.per_minute, else 600000).
        """)

    /// Runs the emulator in the foreground; returns the process exit code once a SIGINT or
    /// SIGTERM stopped it. Throws `EmulatorError` (naming the flag) for unusable arguments.
    public static func run(arguments: [String]) throws -> Int32 {
        guard let options = try Options.parse(arguments) else {
            print(help)
            return 0
        }
        // Block the stop signals before any thread starts, so every thread inherits the mask and
        // the signals wait for sigwait below.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)

        var configuration = options.configuration
        // --tls auto: a certificate of its own, its authority's certificate handed to workers.
        var certificate: EmulatorCertificate? = nil
        if options.ownCertificate {
            do {
                certificate = try EmulatorCertificate(hosts: EmulatorCertificate.hosts(listening: configuration.host, publicURL: configuration.publicURL))
            } catch {
                throw EmulatorError("herald emulator: --tls auto: \(error)")
            }
            configuration.tls = certificate?.files
            if let certificate, let path = options.caFilePath {
                do {
                    try certificate.writeAuthority(to: path)
                } catch {
                    certificate.remove()
                    throw EmulatorError("herald emulator: --write-ca \(path): \(error)")
                }
                printError("herald emulator: the authority of its certificate written to \(path)")
            }
        }
        defer { certificate?.remove() }
        let emulator = EmulatorServer(configuration: configuration)
        try emulator.start()
        for path in options.trustedAccounts {
            do {
                try emulator.trustServiceAccount(json: try readTextFile(path))
            } catch {
                emulator.stop()
                throw EmulatorError("--service-account \(path): \(error)")
            }
        }
        for folder in options.trustedFolders {
            do {
                let projects = try emulator.trustServiceAccounts(inFolder: folder)
                printError("herald emulator: accepting the service accounts of \(projects.count) projects in \(folder)")
            } catch {
                emulator.stop()
                throw EmulatorError("--service-accounts \(folder): \(error)")
            }
        }
        // The service account a worker is told to use: the one asked for, else an existing one
        // it trusts, else a fresh one in a private temporary folder (removed at the end).
        var credentials: String
        var temporaryFolder: String? = nil
        var credentialsNote: String? = nil
        if let path = options.serviceAccountPath {
            for (project, file) in options.serviceAccounts {
                let projectID = project ?? options.projectID
                do {
                    try emulator.writeServiceAccount(to: file, projectID: projectID)
                } catch {
                    emulator.stop()
                    throw EmulatorError("--write-service-account \(file): \(error)")
                }
                printError("herald emulator: service account for project \(projectID) written to \(file)")
            }
            credentials = absolutePath(path)
        } else if let path = options.trustedAccounts.first {
            credentials = absolutePath(path)
            let tokenURI = (try? JSONValue.parse(readTextFile(path)))?["token_uri"]?.stringValue
            if tokenURI != emulator.tokenURI {
                credentialsNote = "# \(path) sends its token requests to \(tokenURI ?? "Google (no token_uri)"), not to this emulator (\(emulator.tokenURI)); use --write-service-account FILE for a service account that does"
            }
        } else {
            do {
                let folder = try makeTemporaryFolder()
                temporaryFolder = folder
                credentials = folder + "/service-account.json"
                try emulator.writeServiceAccount(to: credentials, projectID: options.projectID)
            } catch {
                emulator.stop()
                throw EmulatorError("herald emulator: writing a service account for workers: \(error) (give --write-service-account FILE)")
            }
        }
        if let (count, folder) = options.manyServiceAccounts {
            do {
                let projects = try emulator.writeServiceAccounts(count: count, folder: folder)
                printError("herald emulator: service accounts for \(projects.first ?? "") ... \(projects.last ?? "") written to \(folder)/<project>.json")
            } catch {
                emulator.stop()
                throw EmulatorError("--write-service-accounts \(count)=\(folder): \(error)")
            }
        }
        if let folder = options.apnsKeyFolder {
            do {
                let keyIDs = try emulator.trustAPNsKeys(folder: folder)
                printError("herald emulator: APNs keys \(keyIDs.joined(separator: ", ")) of team \(options.configuration.apnsTeamID) loaded from \(folder)")
            } catch {
                emulator.stop()
                throw EmulatorError("--apns-keys \(folder): \(error)")
            }
        }
        var apnsKey: (keyID: String, teamID: String, path: String)? = nil
        if let folder = options.writeAPNsKeyFolder {
            do {
                apnsKey = try emulator.writeAPNsKey(folder: folder)
            } catch {
                emulator.stop()
                throw EmulatorError("--write-apns-key \(folder): \(error)")
            }
        }
        let protocols = configuration.tls == nil
            ? "cleartext: h2c, HTTP/1.1; a worker speaks HTTP/1.1 to it, not the HTTP/2 over TLS it speaks to FCM"
            : "h2, HTTP/1.1 over TLS"
        print("herald emulator listening on \(emulator.baseURL) (\(protocols))")
        if let quota = options.configuration.scenario.quota {
            print("# the project's quota (--quota-window \(quota.window.rawValue)): \(quota.described)")
        }
        let authority: WorkerAuthority? = certificate.map { .own(caFile: options.caFilePath ?? $0.caFile, kept: options.caFilePath != nil) }
            ?? configuration.tls.map { .given(certificateFile: $0.certificateFile) }
        print(workerSettings(baseURL: emulator.baseURL, credentials: credentials, temporary: temporaryFolder != nil,
                             authority: authority, note: credentialsNote))
        if let apnsKey {
            print(apnsSettings(baseURL: emulator.baseURL, keyID: apnsKey.keyID, teamID: apnsKey.teamID,
                               keyPath: absolutePath(apnsKey.path), topic: options.configuration.apnsTopic, caFile: authority?.file))
        }
        fflush(nil)

        var received: Int32 = 0
        while sigwait(&signals, &received) != 0 {}
        emulator.stop()
        if let temporaryFolder {
            unlink(credentials)
            rmdir(temporaryFolder)
        }
        printError("herald emulator: stopped on \(received == SIGTERM ? "SIGTERM" : "SIGINT")")
        return 0
    }

    /// What a worker (`herald work`, `send`, `groups`, `bench`) must be given to use this emulator
    /// instead of FCM, as lines a shell takes as they are. Without HERALD_FCM_URL a worker sends to
    /// fcm.googleapis.com; without the credentials it refuses to start.
    static func workerSettings(baseURL: String, credentials: String, temporary: Bool, authority: WorkerAuthority?, note: String?) -> String {
        var lines = ["# For a worker to send to this emulator instead of FCM, set (no message reaches a device):"]
        lines.append("export HERALD_FCM_URL=\(shellQuoted(baseURL))")
        lines.append("export HERALD_IID_URL=\(shellQuoted(baseURL))")
        lines.append("export HERALD_FCM_DATA_URL=\(shellQuoted(baseURL))")
        lines.append("export GOOGLE_APPLICATION_CREDENTIALS=\(shellQuoted(credentials))")
        switch authority {
        case .own(let caFile, _)?:
            lines.append("export HERALD_CA_FILE=\(shellQuoted(absolutePath(caFile)))  # the authority of its certificate, made for this run")
        case .given(let certificateFile)?:
            lines.append("export HERALD_CA_FILE=\(shellQuoted(absolutePath(certificateFile)))  # or the CA that signed it")
        case nil:
            break
        }
        if let note { lines.append(note) }
        if temporary {
            lines.append("# (that service account is removed when this emulator stops; --write-service-account FILE keeps one)")
        }
        if case .own(_, let kept)? = authority {
            lines.append(kept
                ? "# (written anew at each start, with a new certificate: a worker that was running before this start trusts it once restarted)"
                : "# (that authority's file is removed when this emulator stops, and made anew at each start: --write-ca FILE keeps one at a path of yours)")
        }
        lines.append("# then, with DATABASE_URL set: herald work")
        let trust = authority.map { "--cacert \(shellQuoted(absolutePath($0.file))) " } ?? ""
        lines.append("# what it received: curl \(trust)'\(baseURL)/emulator/messages?token=<device token>'")
        return lines.joined(separator: "\n")
    }

    /// The lines that register the key the emulator wrote as an APNs app and send its jobs here:
    /// the `herald apns add` line to paste (key file, key ID, team ID, topic) and HERALD_APNS_URL;
    /// `caFile`, the authority a client trusts when it serves HTTPS, goes into the curl hint.
    public static func apnsSettings(baseURL: String, keyID: String, teamID: String, keyPath: String, topic: String, caFile: String? = nil) -> String {
        let trust = caFile.map { "--cacert \(shellQuoted(absolutePath($0))) " } ?? ""
        return [
            "# APNs (POST /3/device/{token}): key ID \(keyID), team ID \(teamID), topic \(topic), key file \(shellQuoted(keyPath))",
            "# Register it as an APNs app (with DATABASE_URL set), then send its jobs here instead of Apple:",
            "herald apns add \(APNsKeyIssue.appName(topic: topic)) --key-file \(shellQuoted(keyPath)) --key-id \(keyID) --team-id \(teamID) --topic \(topic)",
            "export HERALD_APNS_URL=\(shellQuoted(baseURL))",
            "# what it received: curl \(trust)'\(baseURL)/emulator/apns/messages?token=<device token>'",
        ].joined(separator: "\n")
    }

    /// What a worker trusts to verify the emulator's certificate.
    enum WorkerAuthority {
        /// `--tls auto`: the authority made for this run, in the private folder or (`kept`)
        /// where `--write-ca` put it.
        case own(caFile: String, kept: Bool)
        /// `--tls-cert`: the certificate given (self-signed, or the user's CA signed it).
        case given(certificateFile: String)

        /// The file a client is given (HERALD_CA_FILE, curl's --cacert).
        var file: String {
            switch self {
            case .own(let caFile, _): return caFile
            case .given(let certificateFile): return certificateFile
            }
        }
    }

    /// `text` as one shell word: unchanged when it holds nothing a shell would read specially.
    static func shellQuoted(_ text: String) -> String {
        let plain = !text.isEmpty && text.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || "/._-:@%+=,".unicodeScalars.contains($0)
        }
        if plain { return text }
        var quoted = "'"
        for character in text { quoted += character == "'" ? "'\\''" : String(character) }
        return quoted + "'"
    }

    /// The parsed command line.
    public struct Options: Sendable {
        public var configuration = EmulatorConfiguration()
        /// `--write-service-account`: where to write a key, and for which project (nil: `projectID`).
        public var serviceAccounts: [(projectID: String?, path: String)] = []
        public var serviceAccountPath: String? { serviceAccounts.first?.path }
        public var projectID = "herald-emulator"
        /// `--write-service-accounts N=DIR`: how many accounts, and the folder they go to.
        public var manyServiceAccounts: (count: Int, folder: String)? = nil
        public var trustedAccounts: [String] = []
        /// `--service-accounts DIR`: folders whose every key is accepted.
        public var trustedFolders: [String] = []
        /// `--write-apns-key DIR`.
        public var writeAPNsKeyFolder: String? = nil
        /// `--apns-keys DIR`.
        public var apnsKeyFolder: String? = nil
        /// `--tls auto` (the default unless `--tls off` or `--tls-cert`): serve HTTPS with a
        /// certificate made at start (see `EmulatorCertificate`).
        public var ownCertificate = false
        /// `--write-ca FILE`: where the authority's certificate is also written, to stay.
        public var caFilePath: String? = nil

        /// nil when help was asked for.
        public static func parse(_ arguments: [String]) throws(EmulatorError) -> Options? {
            if arguments.contains("--help") || arguments.contains("-h") { return nil }
            let parsed: ParsedOptions
            do {
                parsed = try CommandOptions.parse(command: "emulator", arguments: arguments, options: EmulatorCommand.options)
            } catch {
                throw EmulatorError(error.description)
            }
            func integer(_ name: String, _ range: ClosedRange<Int>) throws(EmulatorError) -> Int? {
                guard let (text, source) = parsed.lookup(name) else { return nil }
                guard let n = Int(text), range.contains(n) else {
                    throw EmulatorError("herald emulator: \(source) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
                }
                return n
            }
            var options = Options()
            var configuration = options.configuration
            if let host = parsed.string("host") { configuration.host = host }
            if let port = try integer("port", 0...65535) { configuration.port = port }
            if let threads = try integer("threads", 1...64) { configuration.threads = threads }
            switch parsed.string("accept-mode") {
            case nil, "acceptor": configuration.acceptMode = .acceptorHandsOff
            case "reuseport": configuration.acceptMode = .reusePort
            case let other?: throw EmulatorError("herald emulator: --accept-mode must be acceptor or reuseport, not '\(other)'")
            }
            if let latency = try integer("latency-ms", 0...600_000) { configuration.latencyMilliseconds = latency }
            if let lifetime = try integer("token-lifetime", 1...86400 * 365) { configuration.tokenLifetimeSeconds = lifetime }
            if let bytes = try integer("token-bytes", 64...8192) { configuration.tokenBytes = bytes }
            if let stored = try integer("max-stored-messages", 0...Int(Int32.max)) { configuration.maxStoredMessages = stored }
            if let url = parsed.string("public-url") {
                guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                    throw EmulatorError("herald emulator: --public-url \"\(url)\" must start with http:// or https://")
                }
                configuration.publicURL = url
            }
            for value in parsed.all("write-service-account") {
                // PROJECT_ID=FILE, or FILE alone (a path may hold '=' after a '/').
                if let equals = value.firstIndex(of: "="), !value[..<equals].contains("/") {
                    let project = String(value[..<equals]), path = String(value[value.index(after: equals)...])
                    guard !project.isEmpty, !path.isEmpty else {
                        throw EmulatorError("herald emulator: --write-service-account \"\(value)\" must be FILE or PROJECT_ID=FILE, e.g. shop-prod=/tmp/shop.json")
                    }
                    options.serviceAccounts.append((project, path))
                } else {
                    options.serviceAccounts.append((nil, value))
                }
            }
            if let value = parsed.string("write-service-accounts") {
                let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, let count = Int(parts[0]), (1...100_000).contains(count), !parts[1].isEmpty else {
                    throw EmulatorError("herald emulator: --write-service-accounts \"\(value)\" must be N=DIR with N from 1 to 100000, e.g. 1000=/tmp/keys")
                }
                options.manyServiceAccounts = (count, parts[1])
            }
            if let project = parsed.string("project-id") {
                guard !project.isEmpty, !project.contains("/") else {
                    throw EmulatorError("herald emulator: --project-id must be a project ID such as my-app-123, not '\(project)'")
                }
                options.projectID = project
            }
            options.trustedAccounts = parsed.all("service-account")
            options.trustedFolders = parsed.all("service-accounts")
            options.writeAPNsKeyFolder = parsed.string("write-apns-key")
            options.apnsKeyFolder = parsed.string("apns-keys")
            if let team = parsed.string("apns-team-id") {
                guard !team.isEmpty, team.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }) else {
                    throw EmulatorError("herald emulator: --apns-team-id must be letters A-Z and digits, as Apple's 10-character team IDs, not '\(team)'")
                }
                configuration.apnsTeamID = team
            }
            if let text = parsed.string("delivery-day") {
                guard let day = DeliveryDataDay(text) else { throw EmulatorError("herald emulator: --delivery-day must be a date YYYY-MM-DD, not '\(text)'") }
                configuration.deliveryData.day = day
            }
            if let text = parsed.string("delivery-shares") {
                guard let data = (try? JSONValue.parse(Array(text.utf8)))?.objectValue else {
                    throw EmulatorError("herald emulator: --delivery-shares must be a JSON object in FCM's shape, e.g. '{\"messageOutcomePercents\": {\"delivered\": 90, \"pending\": 10}}'")
                }
                configuration.deliveryData.data = data
            }
            if let size = try integer("delivery-page-size", 1...10_000) { configuration.deliveryData.pageSize = size }
            configuration.deliveryData.denied = Set(parsed.all("delivery-denied"))
            if let topic = parsed.string("apns-topic") {
                guard APNsKeyIssue.isBundleID(topic) else {
                    throw EmulatorError("herald emulator: --apns-topic must be a bundle ID (letters, digits, - and ., e.g. com.example.shop), not '\(topic.prefix(100))'")
                }
                configuration.apnsTopic = topic
            }
            if let path = parsed.string("scenario") {
                let text: String
                do { text = try readTextFile(path) } catch { throw EmulatorError("herald emulator: --scenario: \(error)") }
                do {
                    configuration.scenario = try Scenario.parse(text)
                } catch {
                    throw EmulatorError("herald emulator: --scenario \(path): \(error)")
                }
            }
            func perSecond(_ name: String, unit: String) throws(EmulatorError) -> Double? {
                guard let (text, source) = parsed.lookup(name) else { return nil }
                var number = Substring(text)
                if number.hasSuffix(unit) { number = number.dropLast(unit.count) }
                guard let value = Double(number), value > 0, value.isFinite, value <= 1e9 else {
                    throw EmulatorError("herald emulator: \(source) must be a number of sends above 0 such as 300\(unit), not '\(text)'")
                }
                return value
            }
            func quotaWindow() throws(EmulatorError) -> QuotaWindowModel? {
                guard let (text, source) = parsed.lookup("quota-window") else { return nil }
                guard let model = QuotaWindowModel(rawValue: text) else {
                    throw EmulatorError("herald emulator: \(source) must be minute (FCM's documented minute, the default) or continuous, not '\(text)'")
                }
                return model
            }
            if let (text, source) = parsed.lookup("quota") {
                // N/s or N/min; the bucket holds a minute's worth unless --quota-burst says less.
                var number = Substring(text)
                var perUnit = 60.0
                if number.hasSuffix("/min") {
                    number = number.dropLast(4)
                    perUnit = 1
                } else if number.hasSuffix("/s") {
                    number = number.dropLast(2)
                }
                guard let value = Double(number), value > 0, value.isFinite, value * perUnit <= 6e10 else {
                    throw EmulatorError("herald emulator: \(source) must be a number of messages above 0 a second or a minute, such as 300/s or 600000/min, not '\(text)'")
                }
                let perMinute = Int((value * perUnit).rounded())
                guard perMinute >= 1 else { throw EmulatorError("herald emulator: \(source) must allow at least one send a minute, not '\(text)'") }
                let burst = try integer("quota-burst", 1...Int(Int32.max))
                let start = try integer("quota-start", 0...Int(Int32.max))
                if let start, start > (burst ?? perMinute) {
                    throw EmulatorError("herald emulator: --quota-start \(start) must not exceed what the quota allows (\(burst ?? perMinute) messages)")
                }
                configuration.scenario.quota = Scenario.Quota(perMinute: perMinute, burst: burst, start: start, window: try quotaWindow() ?? .minute)
            } else if let flag = ["quota-burst", "quota-start"].first(where: { parsed.lookup($0) != nil }) {
                throw EmulatorError("herald emulator: --\(flag) needs --quota N/s (or N/min) as well")
            } else if let window = try quotaWindow() {
                // The scenario's quota, counted as the command line says.
                guard configuration.scenario.quota != nil else {
                    throw EmulatorError("herald emulator: --quota-window needs a quota: --quota N/s (or N/min), or a scenario's \"quota\"")
                }
                configuration.scenario.quota?.window = window
            }
            if let problem = configuration.scenario.quota?.problem { throw EmulatorError("herald emulator: \(problem)") }
            if let (text, source) = parsed.lookup("quota-answer") {
                guard let shape = QuotaAnswerShape(rawValue: text) else {
                    throw EmulatorError("herald emulator: \(source) must be production or legacy, not '\(text)'")
                }
                configuration.scenario.quotaAnswer = shape
            }
            if parsed.has("fcm-limits") {
                let topic = configuration.scenario.limits.topicPerMinute
                configuration.scenario.limits = .fcm
                configuration.scenario.limits.topicPerMinute = topic
            }
            if let topic = try perSecond("topic-limit", unit: "/min") {
                configuration.scenario.limits.topicPerMinute = max(1, Int(topic.rounded()))
            }
            configuration.capacityPerSecond = try perSecond("capacity", unit: "/s")
            if let streams = try integer("max-streams", 1...100_000) { configuration.maxConcurrentStreams = streams }
            if let refuse = try integer("refuse-every", 1...1_000_000_000) { configuration.refuseEveryStream = refuse }
            if let (text, source) = parsed.lookup("goaway-every") {
                do {
                    configuration.goawayEvery = try GoawayEvery(parsing: text)
                } catch {
                    throw EmulatorError("herald emulator: \(source) \(error.description)")
                }
            }
            // HTTPS by default, as FCM serves: a certificate of its own unless --tls-cert gives one
            // or --tls off asks for cleartext.
            let givenCertificate = parsed.string("tls-cert") != nil || parsed.string("tls-key") != nil
            options.ownCertificate = !givenCertificate
            if let (mode, source) = parsed.lookup("tls") {
                switch mode {
                case "auto":
                    if givenCertificate {
                        throw EmulatorError("herald emulator: \(source) auto makes a certificate of its own, and --tls-cert/--tls-key give one; give one or the other")
                    }
                case "off":
                    if givenCertificate {
                        throw EmulatorError("herald emulator: \(source) off serves cleartext, but --tls-cert/--tls-key ask for HTTPS; give one or the other")
                    }
                    options.ownCertificate = false
                default:
                    throw EmulatorError("herald emulator: \(source) must be auto (HTTPS with a certificate made for this run, the default) or off (cleartext), not '\(mode)'")
                }
            }
            switch (parsed.string("tls-cert"), parsed.string("tls-key")) {
            case (nil, nil): break
            case let (certificate?, key?):
                configuration.tls = HTTPServer.TLSFiles(certificateFile: certificate, privateKeyFile: key)
            case (nil, _): throw EmulatorError("herald emulator: --tls-key needs --tls-cert as well")
            case (_, nil): throw EmulatorError("herald emulator: --tls-cert needs --tls-key as well")
            }
            if let path = parsed.string("write-ca") {
                guard options.ownCertificate else {
                    throw EmulatorError(givenCertificate
                        ? "herald emulator: --write-ca writes the authority of the certificate --tls auto makes; with --tls-cert, workers trust your certificate (or the CA that signed it): give that as HERALD_CA_FILE and drop --write-ca"
                        : "herald emulator: --write-ca writes the authority of the certificate --tls auto makes, but --tls off serves cleartext; drop one or the other")
                }
                guard !path.isEmpty, !path.hasSuffix("/") else {
                    throw EmulatorError("herald emulator: --write-ca must name a file, e.g. /credentials/emulator-ca.pem, not '\(path)'")
                }
                options.caFilePath = path
            }
            // A URL whose scheme is not what the port speaks would send workers' token requests
            // (token_uri) in cleartext to a TLS port, which answers nothing they could read.
            if let url = configuration.publicURL, url.hasPrefix("http://"), options.ownCertificate || configuration.tls != nil {
                throw EmulatorError("herald emulator: --public-url \(url) is http://, but the emulator serves HTTPS (\(options.ownCertificate ? "--tls auto, the default" : "--tls-cert")); give https://\(url.dropFirst("http://".count)), or --tls off for cleartext")
            }
            options.configuration = configuration
            return options
        }
    }
}

/// One line to standard error (Glibc's `stderr` is a global Swift 6 will not share across threads).
func printError(_ line: String) {
    var bytes = Array(line.utf8)
    bytes.append(0x0A)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

/// `path` from the root: as given when it starts with /, else under the current directory.
func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return path }
    let directory = String(cString: buffer)
    var relative = Substring(path)
    while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
    return (directory == "/" ? "" : directory) + "/" + relative
}

/// A fresh folder only this user can read, under TMPDIR (or /tmp), named `prefix.XXXXXX`.
func makeTemporaryFolder(prefix: String = "herald-emulator") throws(EmulatorError) -> String {
    var base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    if base.isEmpty { base = "/tmp" }
    while base.count > 1 && base.hasSuffix("/") { base.removeLast() }
    var template = Array((base + "/" + prefix + ".XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else { throw EmulatorError("cannot create a folder under \(base): \(String(cString: strerror(errno)))") }
    return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
