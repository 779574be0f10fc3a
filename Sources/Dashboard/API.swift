import HTTPServer
import JSON
import Postgres
import Queue

/// The JSON API for scripts: queues, dead letters, jobs, and the retry and discard actions.
enum API {
    static func queues(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let (snapshot, throughput) = try request.database {
            (try request.dashboard.statistics.snapshot($0), try request.dashboard.statistics.throughput($0))
        }
        let queues: [JSONValue] = snapshot.queues.map { queue in
            var object = JSONObject()
            object["queue"] = .string(queue.name)
            for state in snapshot.states { object[state] = JSONValue(queue.count(state)) }
            object["dead"] = JSONValue(queue.deadLetters)
            object["oldest_available_age_seconds"] = queue.oldestAvailableAge.map { .number(String(format: "%.3f", $0)) } ?? .null
            return .object(object)
        }
        // The overview's hour chart in numbers: jobs finished in the last hour, by how.
        let hour = throughput.total
        let lastHour: JSONValue = ["completed": JSONValue(hour.completed), "discarded": JSONValue(hour.discarded),
                                   "cancelled": JSONValue(hour.cancelled), "dead": JSONValue(hour.dead)]
        return .json(200, ["queues": .array(queues), "estimated_states": .array(snapshot.estimatedStates.sorted().map { .string($0) }),
                           "last_hour": lastHour])
    }

    /// The registry's projects and the jobs of no project (`project` null): pending jobs, dead
    /// letters, pause and adapted rate, as `herald stats --json` gives them.
    static func projects(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let projects = try request.database { try ProjectOverview.read($0) }
        return .json(200, ["projects": .array(projects.map(\.json))])
    }

    /// Topic subscriptions per topic (herald.topic_stats): subscribed, pending, removing, failed.
    static func topics(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let topics = try request.database { try TopicSubscriptions.list($0) }
        return .json(200, ["topics": .array(topics.map(\.json))])
    }

    static func deadLetters(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let filter = try Filters.fromQuery(request.http)
        let limit = try Filters.integer(request.http.queryValue("limit"), name: "limit", default: 50, range: 1...500)
        let before = try Filters.integer(request.http.queryValue("before"), name: "before", default: nil, range: 1...Int.max)
        let letters = try request.database { try DeadLetters.list($0, filter: filter, limit: limit, before: before) }
        var object = JSONObject()
        object["dead_letters"] = .array(letters.map { $0.json() })
        if letters.count == limit, let last = letters.last { object["next_before"] = JSONValue(last.id) }
        return .json(200, .object(object))
    }

    static func deadLetter(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        guard let letter = try request.database({ try DeadLetters.get($0, id: id) }) else {
            throw DashboardError(404, "no dead letter with id \(id)")
        }
        return .json(200, letter.json(detail: true))
    }

    static func retryOne(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        return try request.database { connection in
            let result = try DeadLetters.retry(connection, ids: [id], source: request.source)
            guard let done = result.retried.first else {
                throw DashboardError(409, try DeadLetters.keptReason(connection, id: id))
            }
            return .json(200, ["retried": 1, "dead_letter_id": JSONValue(done.deadLetterID), "job_id": JSONValue(done.jobID)])
        }
    }

    static func discardOne(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let gone = try request.database { try DeadLetters.discard($0, ids: [id], source: request.source) }
        return .json(200, ["discarded": JSONValue(gone.count), "ids": .array(gone.map { JSONValue($0) })])
    }

    static func retryMatching(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let filter = try Filters.fromJSONBody(request.http, allowsAge: false)
        return try request.database { connection in
            let result = try DeadLetters.retry(connection, matching: filter, source: request.source)
            return .json(200, ["retried": JSONValue(result.retried.count),
                               "jobs": .array(result.retried.map { ["dead_letter_id": JSONValue($0.deadLetterID), "job_id": JSONValue($0.jobID)] }),
                               "kept": .array(result.kept.map { JSONValue($0) })])
        }
    }

    static func discardMatching(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let filter = try Filters.fromJSONBody(request.http, allowsAge: true)
        let gone = try request.database { try DeadLetters.discard($0, matching: filter, source: request.source) }
        return .json(200, ["discarded": JSONValue(gone.count), "ids": .array(gone.map { JSONValue($0) })])
    }

    static func job(_ request: DashboardRequest) throws -> HTTPServerResponse {
        let id = request.id("id")
        let (job, letter) = try request.database { connection in
            (try JobDetails.get(connection, id: id), try DeadLetters.forJob(connection, jobID: id))
        }
        guard job != nil || letter != nil else {
            throw DashboardError(404, "no job with id \(id) in herald.jobs or herald.dead_letters (finished jobs leave after their retention)")
        }
        var object = JSONObject()
        object["job"] = job?.json ?? .null
        object["dead_letter"] = letter.map { $0.json(detail: true) } ?? .null
        return .json(200, .object(object))
    }
}

/// Filters from a query string, a form or a JSON body, checked the same way everywhere.
enum Filters {
    static func fromQuery(_ request: HTTPServerRequest) throws -> DeadLetterFilter {
        try DeadLetterFilter(queue: nonEmpty(request.queryValue("queue")), reason: nonEmpty(request.queryValue("reason")),
                             project: nonEmpty(request.queryValue("project"))).validated()
    }

    static func fromForm(_ request: DashboardRequest) throws -> DeadLetterFilter {
        try DeadLetterFilter(queue: nonEmpty(request.formValue("queue")), reason: nonEmpty(request.formValue("reason")),
                             project: nonEmpty(request.formValue("project"))).validated()
    }

    static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    static func integer(_ text: String?, name: String, default fallback: Int?, range: ClosedRange<Int>) throws -> Int? {
        guard let text = nonEmpty(text) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw DashboardError(400, "\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound == Int.max ? "any" : String(range.upperBound)), not \(JSONValue.quoted(String(text.prefix(40))))")
        }
        return value
    }

    static func integer(_ text: String?, name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
        try integer(text, name: name, default: Optional(fallback), range: range) ?? fallback
    }

    /// `{"queue": "...", "reason": "...", "project": "...", "older_than_seconds": N, "all": true}`. A filter is
    /// required unless `all` is true: an empty body must not replay or delete everything.
    static func fromJSONBody(_ request: HTTPServerRequest, allowsAge: Bool) throws -> DeadLetterFilter {
        let body: JSONValue
        if request.body.isEmpty {
            body = .object(JSONObject())
        } else {
            do { body = try JSONValue.parse(request.body) } catch {
                throw DashboardError(400, "the body is not JSON (\(error)); send {\"queue\": \"...\", \"reason\": \"...\"}")
            }
        }
        guard let object = body.objectValue else {
            throw DashboardError(400, "the body must be a JSON object like {\"queue\": \"...\", \"reason\": \"...\"}, not \(body.typeName == "array" ? "an" : "a") \(body.typeName)")
        }
        let known = allowsAge ? ["queue", "reason", "project", "older_than_seconds", "all"] : ["queue", "reason", "project", "all"]
        for key in object.keys where !known.contains(key) {
            throw DashboardError(400, "unknown field \(JSONValue.quoted(key)); the fields are \(known.joined(separator: ", "))")
        }
        func text(_ key: String) throws -> String? {
            guard let value = object[key], !value.isNull else { return nil }
            guard let string = value.stringValue else { throw DashboardError(400, "\(key) must be a string, not a \(value.typeName)") }
            return nonEmpty(string)
        }
        var filter = DeadLetterFilter(queue: try text("queue"), reason: try text("reason"), project: try text("project"))
        if let age = object["older_than_seconds"], !age.isNull {
            guard let seconds = age.doubleValue, seconds >= 0 else {
                throw DashboardError(400, "older_than_seconds must be a number of seconds of 0 or more")
            }
            filter.olderThanSeconds = seconds
        }
        let all: Bool
        switch object["all"] {
        case .none, .some(.null): all = false
        case .some(.bool(let flag)): all = flag
        case .some(let other): throw DashboardError(400, "all must be true or false, not a \(other.typeName)")
        }
        if filter.isEmpty && !all {
            throw DashboardError(400, "give queue, reason or project to choose dead letters, or \"all\": true to act on every one")
        }
        return try filter.validated()
    }
}
