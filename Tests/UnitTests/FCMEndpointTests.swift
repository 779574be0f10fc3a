import FCM
import JSON
import Testing

@Suite struct FCMEndpointTests {
    @Test func urls() {
        let google = FCMEndpoint(baseURL: "https://fcm.googleapis.com", projectID: "my-project")
        #expect(google.sendURL == "https://fcm.googleapis.com/v1/projects/my-project/messages:send")
        #expect(google.deviceGroupURL == "https://fcm.googleapis.com/fcm/notification")
        let local = FCMEndpoint(baseURL: "http://127.0.0.1:8085//", projectID: "demo")
        #expect(local.sendURL == "http://127.0.0.1:8085/v1/projects/demo/messages:send")
        #expect(local.deviceGroupURL == "http://127.0.0.1:8085/fcm/notification")
    }

    @Test func sendBody() throws {
        let message = Array(#"{"token":"t","data":{"k":"v"}}"#.utf8)
        let plain = FCMEndpoint.sendBody(messageJSON: message)
        #expect(String(decoding: plain, as: UTF8.self) == #"{"message":{"token":"t","data":{"k":"v"}}}"#)
        let check = FCMEndpoint.sendBody(messageJSON: message, validateOnly: true)
        let parsed = try JSONValue.parse(check)
        #expect(parsed["validate_only"]?.boolValue == true)
        #expect(parsed["message"]?["token"]?.stringValue == "t")
    }
}
