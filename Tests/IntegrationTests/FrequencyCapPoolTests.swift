import Foundation
import Testing
import Postgres
import TestSupport

/// Caps and quiet hours end to end: a pool sending to the emulator, a campaign to a device in
/// Istanbul whose quiet hours end 20 seconds from now on its wall clock, and a cap of 2 a day.
/// The clock is the real one: the quiet hours are set around the device's present time.
@Suite(.serialized) struct FrequencyCapPoolTests {
    @Test func aCampaignWaitsOutQuietHoursInTheDevicesZoneAndHoldsItToItsCap() throws {
        try MachineLock.alone {
            let stack = try WorkerStack()
            defer { stack.close() }
            let c = stack.connection
            try c.query("SELECT herald.touch_token('istanbul-device', time_zone => 'Europe/Istanbul')")
            // Quiet from an hour ago until 20 s from now, on the device's clock.
            let window = try c.query("""
                SELECT (date_trunc('second', now() AT TIME ZONE 'Europe/Istanbul') - interval '1 hour')::time,
                       (date_trunc('second', now() AT TIME ZONE 'Europe/Istanbul') + interval '20 seconds')::time,
                       extract(epoch FROM date_trunc('second', now()) + interval '20 seconds')::float8
                """)
            let opensAt = window.double(0, 2)!
            try c.query("SELECT herald.set_quiet_hours('marketing', $1::time, $2::time)", [.text(window[0, 0]!), .text(window[0, 1]!)])
            try c.query("SELECT herald.set_frequency_cap('marketing', 2, '1 day')")
            let campaign = try c.query("SELECT herald.create_campaign('evening-offers')").int(0, 0)!
            for i in 1...3 {
                _ = try c.query("SELECT herald.enqueue(jsonb_build_object('token', 'istanbul-device', 'notification', jsonb_build_object('title', 'Offer ' || $2::int)), queue => 'marketing', campaign_id => $1)",
                                [.int(campaign), .int(i)])
            }
            _ = try c.query("SELECT herald.enqueue('{\"token\": \"istanbul-device\", \"notification\": {\"title\": \"Your code\"}}'::jsonb)")
            let pool = try HeraldProcess(["work", "--processes", "1", "--poll-interval", "0.2"], environment: stack.environment)
            try pool.start()
            defer { pool.signal(SIGKILL); pool.wait(timeout: 10) }
            // The transactional send (queue default) goes at once; the campaign waits.
            #expect(waitUntil(timeout: 30) { stack.emulator.deliveredMessages(token: "istanbul-device").count >= 1 }, "\(pool.output)")
            #expect(waitUntil(timeout: 60) { stack.emulator.deliveredMessages(token: "istanbul-device").count >= 3 }, "\(pool.output)")
            let delivered = stack.emulator.deliveredMessages(token: "istanbul-device")
            let titles = delivered.map { $0.message["notification"]?["title"]?.stringValue ?? "" }
            #expect(titles.first == "Your code")
            let campaignTimes = zip(delivered, titles).filter { $0.1 != "Your code" }.map { Double($0.0.receivedAtMilliseconds) / 1000 }
            #expect(campaignTimes.count == 2, "the cap: 2 a day")
            #expect(campaignTimes.allSatisfy { $0 >= opensAt - 0.05 }, "sent once the quiet hours ended: \(campaignTimes) vs \(opensAt)")
            print("quiet hours: campaign messages reached FCM \(campaignTimes.map { String(format: "%.2f", $0 - opensAt) }) s after the window opened")
            // At FCM is not yet recorded: the two sends' outcomes reach herald.jobs a moment later.
            #expect(try waitUntil(timeout: 30) {
                try stack.count("SELECT count(*) FROM herald.jobs WHERE campaign_id = $1 AND state = 'completed'", [.int(campaign)]) == 2
            })
            let third = try c.query("SELECT state, run_at > now() + interval '23 hours' FROM herald.jobs WHERE campaign_id = $1 AND state <> 'completed'", [.int(campaign)])
            #expect(third.rowCount == 1 && third[0, 0] == "scheduled" && third[0, 1] == "t",
                    "the third waits for tomorrow: \((0..<third.rowCount).map { "\(third[$0, 0] ?? "-") \(third[$0, 1] ?? "-")" })")
            #expect(stack.emulator.deliveredMessages(token: "istanbul-device").count == 3)
        }
    }
}
