import FCM
import JSON
import Postgres

/// FCM's delivery data in the database (migration 380): what the Data API reported per project,
/// app, day and label (herald.delivery_data), each project's last fetch
/// (herald.delivery_data_fetches), and a campaign's days beside what Herald sent
/// (herald.campaign_delivery). The fetch itself (HTTP, keys) is the worker's
/// (`DeliveryDataFetcher`); this is its SQL.
public enum DeliveryData {
    /// FCM's days end at midnight here; Herald counts a campaign's sends in the same days.
    public static let fcmTimeZone = "America/Los_Angeles"
    /// Distinct analytics labels FCM reports a project a day; later ones go unreported.
    public static let reportedLabelsPerDay = 100

    /// What storing one app's entries did.
    public struct Stored: Sendable, Equatable {
        /// Rows written (new or replaced).
        public var stored: Int
        /// Rows of a day given whose label FCM no longer reports, deleted.
        public var removed: Int
        /// Rows that were there already with other figures: FCM revised them.
        public var revised: Int
    }

    /// Replaces the days of `entries` for one app of `project` (days before `since` are left
    /// alone); one statement.
    public static func store(_ connection: PGConnection, project: String, appID: String, entries: [DeliveryDataEntry],
                             since: DeliveryDataDay? = nil) throws(PostgresError) -> Stored {
        let rows: [JSONValue] = entries.map { entry in
            var row = JSONObject()
            row["day"] = .string(entry.date.description)
            row["label"] = .string(entry.analyticsLabel)
            row["messages_accepted"] = entry.messagesAccepted.map { .number(String($0)) } ?? .null
            row["notifications_accepted"] = entry.notificationsAccepted.map { .number(String($0)) } ?? .null
            for (name, column) in zip(DeliveryDataEntry.outcomeNames, outcomeColumns) {
                row[column] = entry.outcomes[name].map { .number(numberText($0)) } ?? .null
            }
            for (name, column) in zip(DeliveryDataEntry.performanceNames, performanceColumns) {
                row[column] = entry.performance[name].map { .number(numberText($0)) } ?? .null
            }
            row["priority_lowered"] = entry.priorityLowered.map { .number(numberText($0)) } ?? .null
            row["data"] = entry.data
            return .object(row)
        }
        let result = try connection.query(SQL.storeDeliveryData, [.text(project), .text(appID),
                                                                  .utf8(Array(JSONValue.array(rows).serialized.utf8)),
                                                                  since.map { .text($0.description) }])
        return Stored(stored: result.int(0, 0) ?? 0, removed: result.int(0, 1) ?? 0, revised: result.int(0, 2) ?? 0)
    }

    /// The columns of herald.delivery_data for `DeliveryDataEntry.outcomeNames` and `performanceNames`, in order.
    public static let outcomeColumns = ["delivered", "pending", "collapsed", "dropped_too_many_pending", "dropped_app_force_stopped",
                                        "dropped_device_inactive", "dropped_ttl_expired"]
    public static let performanceColumns = ["delivered_no_delay", "delayed_device_offline", "delayed_device_doze",
                                            "delayed_message_throttled", "delayed_user_stopped"]
    /// Every share column, as herald.campaign_delivery gives them.
    public static let shareColumns = outcomeColumns + performanceColumns + ["priority_lowered"]

    /// How one project's fetch ended.
    public enum FetchOutcome: String, Sendable {
        /// Every app's pages were read and stored.
        case fetched
        /// Not asked, or refused for good until an operator acts (no app, no access): the reason says which.
        case skipped
        /// FCM or the network failed: tried again sooner than the next day.
        case failed
    }

    /// One project's fetch, for `recordFetches`.
    public struct Fetch: Sendable {
        public var project: String
        public var outcome: FetchOutcome
        public var reason: String?
        public var rows: Int
        public var pages: Int

        public init(project: String, outcome: FetchOutcome, reason: String?, rows: Int = 0, pages: Int = 0) {
            self.project = project
            self.outcome = outcome
            self.reason = reason
            self.rows = rows
            self.pages = pages
        }
    }

    /// Records the fetches (herald.delivery_data_fetches), in one statement.
    public static func recordFetches(_ connection: PGConnection, _ fetches: [Fetch]) throws(PostgresError) {
        guard !fetches.isEmpty else { return }
        let rows: [JSONValue] = fetches.map { fetch in
            var row = JSONObject()
            row["project"] = .string(fetch.project)
            row["outcome"] = .string(fetch.outcome.rawValue)
            row["reason"] = fetch.reason.map { .string(String($0.prefix(1000))) } ?? .null
            row["rows"] = JSONValue(fetch.rows)
            row["pages"] = JSONValue(fetch.pages)
            return .object(row)
        }
        try connection.query(SQL.recordDeliveryDataFetch, [.utf8(Array(JSONValue.array(rows).serialized.utf8))])
    }

    /// The FCM projects due a fetch: never asked, asked more than `every` seconds ago, or failed
    /// more than `retryFailedAfter` seconds ago; with their Android apps.
    public static func dueProjects(_ connection: PGConnection, every: Double, retryFailedAfter: Double) throws(PostgresError)
        -> [(name: String, androidApps: [String])] {
        let rows = try connection.query(SQL.deliveryDataDueProjects, [.double(every), .double(retryFailedAfter)])
        return (0..<rows.rowCount).map { row in (rows[row, 0] ?? "", textArray(rows[row, 1])) }
    }

    /// A project's delivery data as `herald delivery-data status` shows it.
    public struct ProjectStatus: Sendable, Equatable {
        public var project: String
        public var androidApps: [String]
        /// ISO 8601 UTC text; nil: never.
        public var attemptedAt: String?
        public var fetchedAt: String?
        public var outcome: String?
        public var reason: String?
        public var rowsHeld: Int
        /// The latest day FCM reported (YYYY-MM-DD).
        public var latestDay: String?

        public var json: JSONValue {
            var object = JSONObject()
            object["project"] = .string(project)
            object["android_apps"] = .array(androidApps.map { .string($0) })
            object["attempted_at"] = attemptedAt.map { .string($0) } ?? .null
            object["fetched_at"] = fetchedAt.map { .string($0) } ?? .null
            object["outcome"] = outcome.map { .string($0) } ?? .null
            object["reason"] = reason.map { .string($0) } ?? .null
            object["rows"] = JSONValue(rowsHeld)
            object["latest_day"] = latestDay.map { .string($0) } ?? .null
            return .object(object)
        }
    }

    public static func statuses(_ connection: PGConnection) throws(PostgresError) -> [ProjectStatus] {
        let rows = try connection.query(SQL.deliveryDataFetchesList)
        return (0..<rows.rowCount).map { row in
            ProjectStatus(project: rows[row, 0] ?? "", androidApps: textArray(rows[row, 1]), attemptedAt: rows[row, 2],
                          fetchedAt: rows[row, 3], outcome: rows[row, 4], reason: rows[row, 5], rowsHeld: rows.int(row, 6) ?? 0,
                          latestDay: rows[row, 7])
        }
    }

    /// The strings of a JSON array's text (a `text[]` read as `array_to_json`).
    static func textArray(_ text: String?) -> [String] {
        guard let text, let value = try? JSONValue.parse(Array(text.utf8)) else { return [] }
        return (value.arrayValue ?? []).compactMap(\.stringValue)
    }

    /// A campaign that runs (or sent today) with a label FCM will not report today.
    public struct UnreportedCampaign: Sendable, Equatable {
        public var id: Int
        public var name: String
        public var state: String
        public var analyticsLabel: String
        public var place: LabelPlace
    }

    /// The campaigns that started, or sent today, whose label is beyond the 100 FCM reports their
    /// project today (herald.campaign_label_budget), by id.
    public static func unreportedCampaigns(_ connection: PGConnection) throws(PostgresError) -> [UnreportedCampaign] {
        let rows = try connection.query(SQL.unreportedStartedCampaigns)
        return (0..<rows.rowCount).map { row in
            UnreportedCampaign(id: rows.int(row, 0) ?? 0, name: rows[row, 1] ?? "", state: rows[row, 2] ?? "", analyticsLabel: rows[row, 3] ?? "",
                               place: LabelPlace(rank: rows.int(row, 4) ?? 0, labels: rows.int(row, 5) ?? 0, day: rows[row, 6] ?? "",
                                                 reported: false, unreported: nil, unreportedCount: 0))
        }
    }

    /// Campaign `campaign`'s days: what Herald sent and what FCM reports of its label, where the
    /// numbers come from, and its label's place among the day's labels. Nil: no such campaign.
    public static func campaign(_ connection: PGConnection, _ campaign: CampaignProgress) throws(PostgresError) -> CampaignDelivery? {
        let source = try connection.query(SQL.campaignDeliverySource, [.int(campaign.id)])
        guard source.rowCount == 1 else { return nil }
        let days = try connection.query(SQL.campaignDeliveryDays, [.int(campaign.id)])
        var delivery = CampaignDelivery(
            campaignID: campaign.id, project: source[0, 0], service: source[0, 1], analyticsLabel: campaign.analyticsLabel,
            androidApps: textArray(source[0, 2]), lastAttempt: source[0, 3], lastFetched: source[0, 4], lastOutcome: source[0, 5],
            lastReason: source[0, 6], days: [])
        let shareBase = 5
        for row in 0..<days.rowCount {
            var shares: [String: Double] = [:]
            for (offset, column) in shareColumns.enumerated() {
                if let value = days.double(row, shareBase + offset) { shares[column] = value }
            }
            delivery.days.append(CampaignDeliveryDay(
                day: days[row, 0] ?? "", sent: days.int(row, 1) ?? 0, fcmAccepted: days.int(row, 2), fcmApps: days.int(row, 3) ?? 0,
                fcmFetchedAt: days[row, 4], shares: shares, campaignsWithLabel: days.int(row, shareBase + shareColumns.count) ?? 1))
        }
        let place = try connection.query(SQL.campaignLabelPlace, [.int(campaign.id), .int(10)])
        if place.rowCount == 1 {
            delivery.labelPlace = LabelPlace(rank: place.int(0, 0) ?? 0, labels: place.int(0, 1) ?? 0, day: place[0, 2] ?? "",
                                             reported: place.bool(0, 3) ?? true, unreported: place[0, 4],
                                             unreportedCount: place.int(0, 5) ?? 0)
        }
        return delivery
    }
}

/// A campaign's label among its FCM project's labels of today (herald.campaign_label_budget).
public struct LabelPlace: Sendable, Equatable {
    /// Its label's place in the day's order of labels (1 is the first).
    public var rank: Int
    /// The project's distinct labels today.
    public var labels: Int
    /// The day (YYYY-MM-DD, America/Los_Angeles).
    public var day: String
    /// False: its label is beyond the 100 FCM reports.
    public var reported: Bool
    /// Up to 10 of the project's campaigns that go unreported, "name (label)", comma-separated.
    public var unreported: String?
    public var unreportedCount: Int

    /// The warning, in words, when the campaign goes unreported; nil when FCM reports it.
    public var warning: String? {
        guard !reported else { return nil }
        var text = "its label is number \(rank) of the \(labels) distinct analytics labels of its FCM project today (\(day), an America/Los_Angeles day); FCM reports \(DeliveryData.reportedLabelsPerDay) a project a day, so its delivery data goes unreported"
        if let unreported {
            text += "; the campaigns unreported today: \(unreported)\(unreportedCount > 10 ? " and \(unreportedCount - 10) more" : "")"
        }
        return text
    }
}

/// One day of a campaign: what Herald sent and what FCM's Data API reports of its label that day.
public struct CampaignDeliveryDay: Sendable, Equatable {
    /// YYYY-MM-DD, an America/Los_Angeles day (FCM's).
    public var day: String
    /// Jobs of the campaign FCM (or APNs) accepted that day.
    public var sent: Int
    /// FCM's countMessagesAccepted over the project's Android apps; nil: FCM has not reported the day.
    public var fcmAccepted: Int?
    public var fcmApps: Int
    /// When FCM's figures of the day were fetched (ISO 8601 UTC).
    public var fcmFetchedAt: String?
    /// Shares of fcmAccepted by herald.delivery_data's column names (0 to 100).
    public var shares: [String: Double]
    /// The project's campaigns that sent with this label that day (more than 1: FCM's figures are theirs together).
    public var campaignsWithLabel: Int

    public var reported: Bool { fcmAccepted != nil || !shares.isEmpty }

    /// The share dropped, of all kinds together (nil when FCM gave none of them).
    public var dropped: Double? {
        let parts = ["dropped_too_many_pending", "dropped_app_force_stopped", "dropped_device_inactive", "dropped_ttl_expired"].compactMap { shares[$0] }
        return parts.isEmpty ? nil : parts.reduce(0, +)
    }

    public var json: JSONValue {
        var object = JSONObject()
        object["day"] = .string(day)
        object["sent"] = JSONValue(sent)
        object["fcm_accepted"] = fcmAccepted.map { JSONValue($0) } ?? .null
        object["fcm_apps"] = JSONValue(fcmApps)
        object["fcm_fetched_at"] = fcmFetchedAt.map { .string($0) } ?? .null
        for column in DeliveryData.shareColumns {
            object[column] = shares[column].map { .number(numberText($0)) } ?? .null
        }
        object["campaigns_with_label"] = JSONValue(campaignsWithLabel)
        return .object(object)
    }
}

/// What reached the phones for one campaign, and why numbers may be missing.
public struct CampaignDelivery: Sendable, Equatable {
    public var campaignID: Int
    /// The registry project (nil: sent with the pool's own key).
    public var project: String?
    /// `fcm` or `apns` (nil: no registry project).
    public var service: String?
    public var analyticsLabel: String?
    public var androidApps: [String]
    /// The project's last fetch: when (ISO 8601 UTC), when it last succeeded, its outcome and reason.
    public var lastAttempt: String?
    public var lastFetched: String?
    public var lastOutcome: String?
    public var lastReason: String?
    public var days: [CampaignDeliveryDay]
    public var labelPlace: LabelPlace?

    /// Why FCM's numbers cannot be had for this campaign at all; nil when they can.
    public var unavailable: String? {
        if service == "apns" {
            return "APNs has no delivery data API (nor has Web Push): only what Herald sent is known"
        }
        guard let project else {
            return "sent with the pool's own key, not a registry project: Herald asks FCM's Data API for registry projects only (herald.create_campaign(..., project => NAME))"
        }
        guard analyticsLabel != nil else {
            return "no analytics label: FCM counts its messages among the day's unlabelled ones; give campaigns a label (herald.create_campaign(..., analytics_label => ...))"
        }
        if androidApps.isEmpty {
            return "project \(project) names no Android app to ask FCM about: herald projects set \(project) --android-app APP_ID"
        }
        return nil
    }

    /// What a day without FCM's figures says: not fetched (FCM's numbers cannot be had, or the
    /// last fetch did not succeed), or not reported by FCM yet.
    public var missingDayNote: String {
        if unavailable != nil { return "-" }
        if fetchNote != nil { return "not fetched (see above)" }
        return "not reported by FCM yet (it lags a day or more)"
    }

    /// Where the project's fetches stand, in words (nil: the last one succeeded).
    public var fetchNote: String? {
        guard unavailable == nil, let project else { return nil }
        switch lastOutcome {
        case nil:
            return "FCM's numbers have not been fetched yet: the leader of herald work fetches once a day; herald delivery-data fetch --project \(project) fetches now"
        case "fetched"?:
            return nil
        default:
            return "the last fetch (\(lastAttempt ?? "")) \(lastOutcome == "skipped" ? "skipped project \(project)" : "failed"): \(lastReason ?? "")"
        }
    }

    public var json: JSONValue {
        var object = JSONObject()
        object["campaign_id"] = JSONValue(campaignID)
        object["project"] = project.map { .string($0) } ?? .null
        object["service"] = service.map { .string($0) } ?? .null
        object["analytics_label"] = analyticsLabel.map { .string($0) } ?? .null
        object["android_apps"] = .array(androidApps.map { .string($0) })
        object["unavailable"] = unavailable.map { .string($0) } ?? .null
        object["fetched_at"] = lastFetched.map { .string($0) } ?? .null
        object["fetch_note"] = fetchNote.map { .string($0) } ?? .null
        object["label_warning"] = labelPlace?.warning.map { .string($0) } ?? .null
        object["days"] = .array(days.map(\.json))
        return .object(object)
    }
}

extension ProjectRegistry {
    /// Sets the Android apps FCM's Data API is asked about for `name` (empty: none); records the
    /// change in herald.admin_log. Returns the apps stored.
    public static func setAndroidApps(_ connection: PGConnection, name: String, apps: [String], source: String) throws -> [String] {
        try connection.transaction {
            let stored = try AdminError.translating(stateError: .badInput) {
                try connection.query(SQL.setProjectAndroidApps, [.text(name), .text(JSONValue.array(apps.map { .string($0) }).serialized)])
            }
            let list = DeliveryData.textArray(stored[0, 0])
            var details = JSONObject()
            details["project"] = .string(name)
            details["android_apps"] = .array(list.map { .string($0) })
            try AdminLog.record(connection, action: "set_project_android_apps", ids: [], details: .object(details), source: source)
            return list
        }
    }
}
