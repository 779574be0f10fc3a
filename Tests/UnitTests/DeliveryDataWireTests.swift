import FCM
import Foundation
import JSON
import Testing
@testable import Emulator

/// FCM's Data API as Herald reads it: the request, a page as the discovery document shapes it,
/// and the refusals an operator must act on, in words that name what to grant.
@Suite struct DeliveryDataWireTests {
    @Test func theListURLKeepsTheAppIdsColonsAndEncodesThePageToken() {
        let url = FCMDataAPI.listURL(baseURL: "https://fcmdata.googleapis.com/", fcmProject: "shop-prod", appID: "1:1234:android:ab12",
                                     pageSize: 50_000, pageToken: "a+b/c=")
        #expect(url == "https://fcmdata.googleapis.com/v1beta1/projects/shop-prod/androidApps/1:1234:android:ab12/deliveryData?pageSize=10000&pageToken=a%2Bb%2Fc%3D")
        #expect(FCMDataAPI.listURL(baseURL: "http://127.0.0.1:8085", fcmProject: "p", appID: "1:1:android:a", pageSize: 0, pageToken: nil)
                == "http://127.0.0.1:8085/v1beta1/projects/p/androidApps/1:1:android:a/deliveryData?pageSize=1")
        #expect(FCMDataAPI.scope == "https://www.googleapis.com/auth/cloud-platform", "the only scope deliveryData.list takes")
    }

    @Test func androidAppIdsAreTheConsolesShape() {
        #expect(FCMDataAPI.isAndroidAppID("1:1234567890:android:0a1b2c3d4e5f6789"))
        for refused in ["com.example.shop", "1:1234567890:ios:0a1b2c", "1:12a:android:0a", "1:1234:android:", "1:1234:android:0A1B", "1:2:android:a:b", ""] {
            #expect(!FCMDataAPI.isAndroidAppID(refused), "\(refused)")
        }
    }

    @Test func aPageIsReadAsTheDiscoveryDocumentShapesIt() throws {
        let body = """
            {"androidDeliveryData": [
              {"appId": "1:1:android:a", "date": {"year": 2026, "month": 3, "day": 1}, "analyticsLabel": "spring-sale",
               "data": {"countMessagesAccepted": "1200", "countNotificationsAccepted": "800",
                        "messageOutcomePercents": {"delivered": 91.5, "pending": 5, "collapsed": 1.5, "droppedTooManyPendingMessages": 0.5,
                                                   "droppedAppForceStopped": 0.5, "droppedDeviceInactive": 0.75, "droppedTtlExpired": 0.25},
                        "deliveryPerformancePercents": {"deliveredNoDelay": 80, "delayedDeviceOffline": 10, "delayedDeviceDoze": 1,
                                                        "delayedMessageThrottled": 0.5, "delayedUserStopped": 0},
                        "messageInsightPercents": {"priorityLowered": 2},
                        "proxyNotificationInsightPercents": {"proxied": 40, "skippedNotThrottled": 60}}},
              {"appId": "1:1:android:a", "date": {"year": 2026, "month": 3, "day": 2}, "data": {"countMessagesAccepted": "7"}},
              {"appId": "1:1:android:a", "date": {"year": 2026, "month": 3}, "data": {"countMessagesAccepted": "3"}}
            ],
             "nextPageToken": "next-one"}
            """
        let page = try DeliveryDataPage.parse(Array(body.utf8))
        #expect(page.nextPageToken == "next-one")
        #expect(page.entries.count == 2, "a month without a day is no day's figure")
        let first = try #require(page.entries.first)
        #expect(first.date.description == "2026-03-01" && first.analyticsLabel == "spring-sale" && first.messagesAccepted == 1200
                && first.notificationsAccepted == 800)
        #expect(first.outcomes == ["delivered": 91.5, "pending": 5, "collapsed": 1.5, "droppedTooManyPendingMessages": 0.5,
                                   "droppedAppForceStopped": 0.5, "droppedDeviceInactive": 0.75, "droppedTtlExpired": 0.25])
        #expect(first.performance["deliveredNoDelay"] == 80 && first.performance["delayedDeviceDoze"] == 1 && first.priorityLowered == 2)
        #expect(first.data["proxyNotificationInsightPercents"]?["proxied"]?.doubleValue == 40, "the whole data object is kept")
        #expect(page.entries[1].analyticsLabel == "" && page.entries[1].messagesAccepted == 7 && page.entries[1].outcomes.isEmpty,
                "the messages without a label: one entry, label empty")
        let last = try DeliveryDataPage.parse(Array("{}".utf8))
        #expect(last.entries.isEmpty && last.nextPageToken == nil, "an empty last page leaves both out")
        #expect(throws: DeliveryDataPage.Unreadable.self) { try DeliveryDataPage.parse(Array("<html>".utf8)) }
        #expect(throws: DeliveryDataPage.Unreadable.self) { try DeliveryDataPage.parse(Array(#"{"androidDeliveryData": 3}"#.utf8)) }
    }

    @Test func refusalsSayWhatToGrant() {
        let denied = DeliveryDataRefusal(httpStatus: 403, body: Array("""
            {"error": {"code": 403, "message": "Permission 'fcmdata.deliverydata.list' denied on resource '//fcmdata.googleapis.com/projects/shop/androidApps/1:1:android:a' (or it may not exist).",
             "status": "PERMISSION_DENIED", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED",
             "domain": "iam.googleapis.com", "metadata": {"permission": "fcmdata.deliverydata.list"}}]}}
            """.utf8))
        #expect(denied.accessDenied && !denied.unauthenticated)
        #expect(denied.problem(account: "sender@shop.iam.gserviceaccount.com", fcmProject: "shop", appID: "1:1:android:a")
                == "the service account sender@shop.iam.gserviceaccount.com lacks the IAM permission fcmdata.deliverydata.list on project shop; grant it the role Firebase Cloud Messaging API Admin (roles/firebasecloudmessaging.admin) or Firebase Cloud Messaging API Viewer (roles/firebasecloudmessaging.viewer)")

        let disabled = DeliveryDataRefusal(httpStatus: 403, body: Array("""
            {"error": {"code": 403, "message": "Firebase Cloud Messaging Data API has not been used in project 42 before or it is disabled.",
             "status": "PERMISSION_DENIED", "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
             "domain": "googleapis.com", "metadata": {"service": "fcmdata.googleapis.com", "activationUrl": "https://console.developers.google.com/apis/api/fcmdata.googleapis.com/overview?project=42"}}]}}
            """.utf8))
        #expect(disabled.accessDenied)
        #expect(disabled.problem(account: "a", fcmProject: "shop", appID: "x")
                == "the Firebase Cloud Messaging Data API (fcmdata.googleapis.com) is not enabled in Google Cloud project shop; enable it (https://console.developers.google.com/apis/api/fcmdata.googleapis.com/overview?project=42)")

        let unknown = DeliveryDataRefusal(httpStatus: 404, body: Array(#"{"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}"#.utf8))
        #expect(!unknown.accessDenied && unknown.problem(account: "a", fcmProject: "shop", appID: "1:9:android:f").contains("FCM knows no Android app 1:9:android:f in project shop"))

        // A proxy's page that echoes the request must not carry the token further.
        let echoed = DeliveryDataRefusal(httpStatus: 502, body: Array("bad gateway for Authorization: Bearer ya29.secret-token-value".utf8),
                                         redacting: ["ya29.secret-token-value"])
        #expect(!echoed.description.contains("secret-token-value") && !echoed.problem(account: "a", fcmProject: "p", appID: "x").contains("secret-token-value"))
    }

    @Test func daysReadWriteAndOrderAsDates() {
        #expect(DeliveryDataDay("2026-03-01") == DeliveryDataDay(year: 2026, month: 3, day: 1))
        #expect(DeliveryDataDay("2026-3-1") == nil && DeliveryDataDay("2026-13-01") == nil && DeliveryDataDay("yesterday") == nil)
        #expect(DeliveryDataDay(year: 2025, month: 12, day: 31) < DeliveryDataDay(year: 2026, month: 1, day: 1))
        #expect(DeliveryDataDay(year: 999, month: 1, day: 2).description == "0999-01-02")
    }

    @Test func theEmulatorRoutesTheDataAPIAndCountsAnAndroidLabelFirst() {
        #expect(Route.match(method: "GET", path: "/v1beta1/projects/shop/androidApps/1:1:android:a/deliveryData")
                == .deliveryData(project: "shop", app: "1:1:android:a"))
        #expect(Route.match(method: "POST", path: "/v1beta1/projects/shop/androidApps/1:1:android:a/deliveryData") == .methodNotAllowed(allowed: "GET"))
        #expect(Route.match(method: "GET", path: "/v1beta1/projects/shop/iosApps/x/deliveryData") == .notFound)
        #expect(Route.match(method: "POST", path: "/emulator/delivery-data") == .deliveryDataControl)
        #expect(Route.match(method: "DELETE", path: "/emulator/delivery-data") == .methodNotAllowed(allowed: "GET, POST"))

        let both: JSONValue = ["fcm_options": ["analytics_label": "all"], "android": ["fcm_options": ["analytics_label": "android-only"]]]
        #expect(DeliveryDataBook.label(of: both.objectValue!) == "android-only", "FCM reports an Android message under its android label")
        #expect(DeliveryDataBook.label(of: (["fcm_options": ["analytics_label": "all"]] as JSONValue).objectValue!) == "all")
        #expect(DeliveryDataBook.label(of: JSONObject()) == "")

        var options = DeliveryDataOptions()
        #expect(DeliveryDataBook.apply((["day": "2026-02-30x"] as JSONValue).objectValue!, to: &options) == "day must be YYYY-MM-DD or null")
        #expect(DeliveryDataBook.apply((["page_size": 0] as JSONValue).objectValue!, to: &options)?.contains("page_size") == true)
        #expect(DeliveryDataBook.apply((["weather": "fine"] as JSONValue).objectValue!, to: &options)?.contains("unknown member weather") == true)
        #expect(DeliveryDataBook.apply((["day": "2026-02-03", "denied": ["a", "b"], "page_size": 2] as JSONValue).objectValue!, to: &options) == nil)
        #expect(options.day?.description == "2026-02-03" && options.denied == ["a", "b"] && options.pageSize == 2)
    }

    @Test func theEmulatorsClockDayIsTheDayInLosAngeles() {
        var cache: (day: DeliveryDataDay, from: Double, until: Double)?
        // 2026-03-02T05:00:00Z is 21:00 on March 1st in Los Angeles (PST, UTC-8).
        #expect(DeliveryDataBook.day(of: 1_772_427_600, cache: &cache).description == "2026-03-01")
        #expect(cache.map { $0.until - $0.from } == 86_400)
        // 08:00Z is midnight there: the next day.
        #expect(DeliveryDataBook.day(of: 1_772_438_400, cache: &cache).description == "2026-03-02")
    }
}
