import Testing
@testable import WebPush

@Suite struct PushEndpointTests {
    @Test(arguments: [
        ("https://fcm.googleapis.com/fcm/send/dVq:APA91bH", "fcm.googleapis.com", "https://fcm.googleapis.com"),
        ("https://updates.push.services.mozilla.com/wpush/v2/gAAAAABk", "updates.push.services.mozilla.com",
         "https://updates.push.services.mozilla.com"),
        ("https://web.push.apple.com/QF8w7V0M5Z3hbQiw4tIsMBJ", "web.push.apple.com", "https://web.push.apple.com"),
        ("https://wns2-par02p.notify.windows.com/w/?token=BQYAAA", "wns2-par02p.notify.windows.com", "https://wns2-par02p.notify.windows.com"),
        ("https://Push.Example.NET:443/x", "push.example.net", "https://push.example.net"),
        ("https://push.example.net:8443/x", "push.example.net", "https://push.example.net:8443"),
        ("https://8.8.8.8/x", "8.8.8.8", "https://8.8.8.8"),
        ("https://[2606:4700:4700::1111]:8443/x", "2606:4700:4700::1111", "https://[2606:4700:4700::1111]:8443"),
        ("https://[2606:4700:4700:0:0:0:0:1111]/x", "2606:4700:4700::1111", "https://[2606:4700:4700::1111]"),
        ("https://push.example.net", "push.example.net", "https://push.example.net"),
    ])
    func readsBrowsersEndpointsAndTheirOrigin(_ url: String, _ host: String, _ origin: String) throws {
        let endpoint = try EndpointPolicy().endpoint(url)
        #expect(endpoint.host == host)
        #expect(endpoint.origin == origin)
        #expect(endpoint.url == url)
    }

    @Test(arguments: [
        ("http://push.example.net/x", "must be an https:// URL"),
        ("HTTPS://push.example.net/x", "must be an https:// URL"),
        ("ftp://push.example.net/x", "not ftp:"),
        ("push.example.net/x", "must be an https:// URL"),
        ("", "is empty"),
        ("https://push.example.net/a b", "whitespace"),
        ("https://push.exämple.net/x", "non-ASCII"),
        ("https://user:pw@push.example.net/x", "user information"),
        ("https://evil@127.0.0.1/x", "user information"),
        ("https://push.example.net/x#frag", "fragment"),
        ("https://push.example.net\\@evil/x", "backslash"),
        ("https:///x", "no host"),
        ("https://:443/x", "no host"),
        ("https://push.example.net:0/x", "port"),
        ("https://push.example.net:65536/x", "port"),
        ("https://push.example.net:+443/x", "port"),
        ("https://push.example.net:/x", "port"),
        ("https://%31%32%37.0.0.1/x", "percent-encoded"),
        ("https://push_service.example.net/x", "characters other than"),
        ("https://push.example.net./x", "ending in a dot"),
        ("https://push..example.net/x", "empty label"),
        ("https://[::1/x", "closing ]"),
        ("https://[fe80::1%25eth0]/x", "zone"),
        ("https://[1::2::3]/x", "not an IPv6 address"),
        ("https://[::1]x/x", "not a port"),
        ("https://1.2.3.4.5/x", "not an IPv4 address"),
        ("https://256.0.0.1/x", "not an IPv4 address"),
        ("https://example.0x/x", "ends in a number"),
    ])
    func refusesWhatNoBrowserGives(_ url: String, _ words: String) {
        let error = #expect(throws: WebPushError.self, "\(url)") { try PushEndpoint(url) }
        #expect(error?.field == "endpoint")
        #expect(error?.message.contains(words) == true, "\(url): \(error?.message ?? "")")
    }

    /// Every spelling getaddrinfo (inet_aton) and URL parsers read as an IPv4 address, refused
    /// with the address it reads as: none slips past as a "name".
    @Test(arguments: [
        ("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("0x7F.1", "127.0.0.1"), ("0x7f.0.0.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"), ("017700000001", "127.0.0.1"), ("127.1", "127.0.0.1"), ("127.0.1", "127.0.0.1"),
        ("127.0.0.01", "127.0.0.1"), ("0", "0.0.0.0"), ("0x0", "0.0.0.0"), ("10.1", "10.0.0.1"), ("167772161", "10.0.0.1"),
        ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"), ("2852039166", "169.254.169.254"), ("0300.0250.0.1", "192.168.0.1"),
        ("134744072", "8.8.8.8"),
    ])
    func otherSpellingsOfIPv4AreRefusedNamingTheAddress(_ host: String, _ reads: String) {
        let error = #expect(throws: WebPushError.self, "\(host)") { try PushEndpoint("https://\(host)/x") }
        #expect(error?.message.contains("reads as the IPv4 address \(reads)") == true, "\(host): \(error?.message ?? "")")
    }

    @Test(arguments: [
        ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("10.0.0.1", "private"), ("172.16.0.1", "private"),
        ("172.31.255.255", "private"), ("192.168.1.1", "private"), ("100.64.0.1", "carrier-grade NAT"), ("100.127.255.255", "carrier-grade NAT"),
        ("169.254.169.254", "link-local"), ("0.0.0.0", "unspecified"), ("0.1.2.3", "unspecified"), ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"), ("255.255.255.255", "broadcast"), ("240.0.0.1", "reserved"), ("198.18.0.1", "reserved"),
        ("[::1]", "loopback"), ("[::]", "unspecified"), ("[0:0:0:0:0:0:0:1]", "loopback"),
        ("[::ffff:127.0.0.1]", "IPv4-mapped address of 127.0.0.1"), ("[::ffff:7f00:1]", "IPv4-mapped address of 127.0.0.1"),
        ("[::ffff:10.0.0.1]", "private"), ("[::ffff:a9fe:a9fe]", "link-local"), ("[::127.0.0.1]", "IPv4-compatible address of 127.0.0.1"),
        ("[::a00:1]", "private"), ("[64:ff9b::127.0.0.1]", "NAT64 address of 127.0.0.1"), ("[64:ff9b::a9fe:a9fe]", "link-local"),
        ("[64:ff9b:1::1]", "local-use NAT64"), ("[2002:7f00:1::1]", "6to4 address of 127.0.0.1"), ("[2002:c0a8:101::]", "private"),
        ("[2001:0:4136:e378::1]", "Teredo"), ("[fc00::1]", "unique local"), ("[fd12:3456::1]", "unique local"), ("[fe80::1]", "link-local"),
        ("[febf::1]", "link-local"), ("[fec0::1]", "site-local"), ("[ff02::1]", "multicast"), ("[100::1]", "discard-only"),
    ])
    func internalAddressesAreRefusedUnlessAllowed(_ host: String, _ words: String) throws {
        let url = "https://\(host):8443/push/1"
        let error = #expect(throws: WebPushError.self, "\(host)") { try EndpointPolicy().endpoint(url) }
        #expect(error?.message.contains(words) == true, "\(host): \(error?.message ?? "")")
        #expect(error?.message.contains("unless that host is allowed") == true)
        // Allowed by its host, the same endpoint passes.
        let endpoint = try EndpointPolicy(allowedHosts: [host]).endpoint(url)
        #expect(endpoint.origin == "https://\(endpoint.address.map { if case .v6 = $0 { "[\(endpoint.host)]" } else { endpoint.host } } ?? "")" + ":8443")
    }

    @Test(arguments: ["8.8.8.8", "172.15.255.255", "172.32.0.1", "100.63.255.255", "100.128.0.1", "169.253.0.1", "192.169.0.1",
                      "223.255.255.255", "[2606:4700::1111]", "[::ffff:8.8.8.8]", "[64:ff9b::808:808]", "[2002:808:808::1]"])
    func publicAddressesPass(_ host: String) throws {
        _ = try EndpointPolicy().endpoint("https://\(host)/x")
    }

    @Test func anAllowedAddressAllowsThatAddressOnly() throws {
        let policy = EndpointPolicy(allowedHosts: ["127.0.0.1", "[::1]", "Push.Internal.Example"])
        _ = try policy.endpoint("https://127.0.0.1:9443/x")
        _ = try policy.endpoint("https://[0::1]:9443/x")
        #expect(throws: WebPushError.self) { try policy.endpoint("https://127.0.0.2:9443/x") }
        #expect(throws: WebPushError.self) { try policy.endpoint("https://[::ffff:127.0.0.1]/x") }
        // A name resolving inside is allowed when the name is.
        let name = try PushEndpoint("https://push.internal.example/x")
        try policy.check(name, resolvedTo: [IPAddress("10.0.0.5")!])
    }

    @Test func aNameIsJudgedByEveryAddressItResolvedTo() throws {
        let policy = EndpointPolicy()
        let endpoint = try policy.endpoint("https://push.example.net/x")
        try policy.check(endpoint, resolvedTo: [IPAddress("8.8.8.8")!, IPAddress("2606:4700::1111")!])
        for addresses in [["8.8.8.8", "10.0.0.1"], ["::ffff:127.0.0.1"], ["169.254.169.254"], ["fd00::1", "8.8.4.4"]] {
            let error = #expect(throws: WebPushError.self, "\(addresses)") {
                try policy.check(endpoint, resolvedTo: addresses.map { IPAddress($0)! })
            }
            #expect(error?.message.contains("push.example.net resolves to") == true, "\(error?.message ?? "")")
        }
        let none = #expect(throws: WebPushError.self) { try policy.check(endpoint, resolvedTo: []) }
        #expect(none?.message.contains("resolved to no address") == true)
    }

    @Test func addressTextIsReadStrictlyAndWrittenShort() {
        #expect(IPAddress("127.0.0.1") == .v4(0x7F00_0001))
        for text in ["127.1", "0x7f.0.0.1", "127.0.0.01", "1.2.3", "1.2.3.4.5", "256.1.1.1", ":::", "1::2::3", "1:2:3:4:5:6:7:8:9",
                     "12345::", "::g", "1:2:3:4:5:6:7", ":1::", "::1:", "fe80::1%eth0", ""] {
            #expect(IPAddress(text) == nil, "\(text)")
        }
        #expect(IPAddress("::")?.description == "::")
        #expect(IPAddress("::1")?.description == "::1")
        #expect(IPAddress("1::")?.description == "1::")
        #expect(IPAddress("1:0:0:2:0:0:0:3")?.description == "1:0:0:2::3")
        #expect(IPAddress("2001:db8:0:1:1:1:1:1")?.description == "2001:db8:0:1:1:1:1:1")
        #expect(IPAddress("::ffff:1.2.3.4")?.description == "::ffff:102:304")
        #expect(IPAddress("1:2:3:4:5:6:1.2.3.4") == IPAddress("1:2:3:4:5:6:102:304"))
    }
}
