import FCM
import Foundation
import HTTPClient
import Postgres
import Queue

/// The store thread's side of a worker that carries several projects (`herald work` without
/// `--project`, or with it given several times): which projects it claims for, each project's
/// claim target (its FCM project's rate and pauses), its keys, and the claim's rotation.
///
/// - A project is taken up when it first has due jobs: its registry entry read, its key loaded
///   and checked against the entry's FCM project, its first access token fetched, its keys put
///   in the `ProjectKeyRing` the sender reads. A project idle for `idleSeconds` is dropped again,
///   so the worker's memory follows the projects with work, not the registry's size.
/// - A key that cannot be used (missing, unreadable, not a service account, of another FCM
///   project, refused by the token endpoint) pauses that project alone with the reason
///   (`credentials: ...`, naming the file, never the key); it is looked at again every
///   `keyRetrySeconds`, and the first success lifts that pause. The key file of every project
///   held is looked at as often: a new key of the same FCM project is taken up in place (no
///   restart); a file that became unusable pauses the project the same way.
/// - Each project has an owner among the pool's workers (`owns`): the others take it up only
///   when their own projects leave room in a claim, so a thousand small projects are taken up
///   once in the pool, not once per worker, and a backlog is still worked by all.
/// - An APNs app (a registry entry of service 'apns') is taken up the same way, as a lane with its
///   own .p8 key and provider token, sent by the sender's APNs part (StoreProjects+APNs.swift,
///   APNsSender.swift); a broken key pauses that app alone, naming the file.
/// - Each claim lists the projects with due jobs (one index probe each), skips those paused (an
///   operator's pause, a quota hold or outage of its own) and claims for the others in turn in
///   one statement (herald.claim_projects), each its share of the batch as a project's own
///   worker claims it, then the rest to those that had more, starting after the project the last
///   claim ended with: one project's backlog never holds another's jobs back beyond one share.
final class StoreProjects {
    struct Lane {
        /// An FCM project's keys (nil for an APNs app).
        var keys: ProjectKeys?
        /// An APNs app's keys (nil for an FCM project); StoreProjects+APNs.swift.
        var apns: APNsAppKeys? = nil
        var target: Claimer.ClaimTarget
        var adaptive: AdaptiveRate
        var rateState = AdaptiveRate.State()
        var rateReadAt = -Double.infinity
        let startedAt: Double
        /// The sender's quota hold or outage pause of this project, and what of it was published.
        var pause = ProjectPause()
        var published = 0.0
        var lastClaim: Double
    }

    /// A project whose key could not be used: why (nil: the token endpoint could not be reached,
    /// a blip that pauses nothing) and when to look again.
    struct Broken {
        var reason: String?
        var retryAt: Double
    }

    let configuration: WorkerConfiguration
    let ring: ProjectKeyRing
    let log: Logger
    /// The projects this worker may carry (nil: every project of the registry).
    let names: Set<String>?
    /// The pool's own key, for the jobs of no project (nil: they are not worked here).
    let unaddressed: ProjectKeys?
    var lanes: [String?: Lane] = [:]
    /// One client for every project's token endpoint requests (made at the first).
    private var tokenClient: HTTPClient?
    var broken: [String: Broken] = [:]
    var registry: [String: Project] = [:]
    /// The APNs apps of the registry, from the last reading (StoreProjects+APNs.swift).
    var apnsRegistry: [String: APNsApp] = [:]
    /// Names with due jobs but no entry this worker can send for (removed from the registry): not
    /// asked for again until the next reading of the registry.
    var unknown: Set<String> = []
    private var registryReadAt = -Double.infinity
    /// The registry was read once: a name new to it since has joined.
    var registryRead = false
    private var keysCheckedAt = 0.0
    /// The last project a claim took jobs for: the next claim starts after it.
    private var lastServed: String? = nil
    /// The projects the last claim found with due jobs: one found now and not then (an idle
    /// project's one-time code) is served first, before the rotation goes on.
    private var dueBefore: Set<String?> = []
    /// Projects jobs were just inserted for (the NOTIFY's payload, `_notify_jobs.sql`): the next
    /// claim serves them first.
    private var notifiedProjects: Set<String?> = []
    /// Another worker's projects seen due while this one had room, and since when.
    private var strangersSeen: [String?: Double] = [:]
    /// Another worker's projects a NOTIFY named (new jobs: maybe a one-time code) and still due:
    /// helped after `strangerSeconds` even while this worker's own projects fill its claims, so
    /// a code does not wait for an owner that is starting, stopped or stuck.
    private var notifiedStrangers: Set<String?> = []
    let registryInterval: Double
    /// The pool's counters: the rate of the jobs of no project is shown as a worker of no
    /// project shows it (herald_project_rate_per_second without a label).
    var metrics: WorkerMetrics?
    static let idleSeconds = 300.0
    static let keyRetrySeconds = 5.0
    /// Each project visited by a claim may take at least this many jobs, so a claim of 256 over
    /// a thousand projects makes 32 statements, not 256.
    static let minimumShare = 8
    /// Projects taken up by one claim at most (each a key read, a signature and a token request on
    /// this thread): a thousand projects due at once are taken up over the claims that follow,
    /// while the outcomes of those already taken up keep being recorded.
    static let takeUpsPerClaim = 16
    /// How long another worker's project stays due before a worker with room takes it up too.
    static let strangerSeconds = 0.25
    /// Time one claim spends taking projects up at most (the first is always taken up).
    static let takeUpSeconds = 0.02

    /// Whether `project` is this worker's own to take up as soon as it has due jobs: each
    /// registered project belongs to one worker of the pool (by a hash of its name), so a
    /// thousand projects with a few jobs each cost each worker half (a third, ...) of the key
    /// reads, signatures, token requests and per-project state. Another worker's project is
    /// taken up once this worker's own leave room in a claim (its backlog, or its owner busy,
    /// stopped or restarting). The jobs of no project, a worker whose place is not known, and a
    /// pool of one process: every project is its own.
    func owns(_ project: String?) -> Bool {
        guard let project, let index = configuration.poolIndex, configuration.poolProcesses > 1 else { return true }
        return Self.owner(of: project, among: configuration.poolProcesses) == index
    }

    /// The pool place that owns `project` among `processes`: FNV-1a of its name, the same in
    /// every process (Swift's own hash is seeded per process).
    static func owner(of project: String, among processes: Int) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in project.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return Int(hash % UInt64(max(1, processes)))
    }

    init(configuration: WorkerConfiguration, ring: ProjectKeyRing, names: Set<String>?, unaddressed: ProjectKeys?, log: Logger,
         registryInterval: Double = 10) {
        self.configuration = configuration
        self.ring = ring
        self.names = names
        self.unaddressed = unaddressed
        self.log = log
        self.registryInterval = registryInterval
        if let unaddressed { ring.put(unaddressed) }
    }

    private static func key(_ project: String?) -> String { project ?? "" }

    /// Whether registry project `name` is this worker's to claim: named (or every one, carrying
    /// the registry), and not left to a pool of its own (`--skip-project`).
    func carries(_ name: String) -> Bool {
        (names?.contains(name) ?? true) && !configuration.skippedProjects.contains(name)
    }

    // MARK: Claiming

    /// One claim over the projects with due jobs, in turn.
    func claim(_ store: JobStore, connection: PGConnection, queues: [String], limit: Int, leaseSeconds: Double, now: Double) throws -> Claim {
        try readRegistryIfDue(connection, now: now)
        var candidates: [String?] = []
        var wait: Double? = nil
        let claimer = store.claimer
        var takenUp = 0
        let notified = notifiedProjects
        notifiedProjects.removeAll(keepingCapacity: true)
        // Projects just notified first: taken up (and so claimed for) before the others.
        var listed = try claimer.projectsWithDueJobs()
        if !notified.isEmpty {
            listed = listed.filter { notified.contains($0.project) } + listed.filter { !notified.contains($0.project) }
        }
        // Another worker's projects not held here: taken up only when this worker's own leave
        // room in the batch (see `owns`).
        var strangers: [Claimer.DueProject] = []
        var ownDue = 0
        var takeUpTime = 0.0
        func consider(_ due: Claimer.DueProject) throws {
            let project = due.project
            if lanes[project] == nil {
                // Each take-up is a key read, a signature and a token request on this thread:
                // a few a claim, and no more than `takeUpSeconds` of them, so the outcomes and
                // claims of the projects already held do not wait behind a thousand take-ups.
                guard takenUp < Self.takeUpsPerClaim, takenUp == 0 || takeUpTime < Self.takeUpSeconds else {
                    wait = 0  // more to take up: claim again at once
                    return
                }
                takenUp += 1
                let started = Date().timeIntervalSince1970
                defer { takeUpTime += Date().timeIntervalSince1970 - started }
                guard try prepare(project, connection: connection, now: now) else { return }
            }
            if let name = project, due.pausedReason != nil, try Project.credentialsRestored(connection, name: name) {
                log.info("project \(name): its key works again; its pause for the key is lifted")
            }
            candidates.append(project)
        }
        for due in listed {
            let project = due.project
            if let name = project {
                if !carries(name) { continue }
            } else if unaddressed == nil {
                continue
            }
            if let reason = due.pausedReason, !reason.hasPrefix("credentials: ") { continue }  // an operator's pause
            if let lane = lanes[project], lane.pause.isPaused(at: now) {
                wait = min(wait ?? .infinity, lane.pause.until - now)
                continue
            }
            if let name = project, let known = broken[name], known.retryAt > now { continue }  // looked at again later
            if lanes[project] == nil && !owns(project) {
                strangers.append(due)
                if notified.contains(project) { notifiedStrangers.insert(project) }
                continue
            }
            ownDue += 1
            try consider(due)
        }
        // This worker's own projects (and those it holds) cannot fill the batch: it helps with
        // the others' too (a backlog of one project is worked by every worker of the pool),
        // those that stayed due `strangerSeconds`: a project whose owner takes its few jobs
        // (a one-time code) within that time is not taken up a second time, with a second
        // access token, for nothing.
        var seen: [String?: Double] = [:]
        // With nothing else to claim, the claim comes back when such a project may be taken up;
        // with jobs of its own, it claims again as soon as it has room (a wait here would hold
        // every project's claims back, one-time codes too).
        var strangerWait: Double? = nil
        let room = ownDue * Self.minimumShare < limit
        var stillNotified: Set<String?> = []
        for due in strangers {
            // Without room, only those a NOTIFY named (their owner did not take the new jobs
            // within `strangerSeconds`): a backlog is its owner's, a code is anyone's.
            let named = notifiedStrangers.contains(due.project)
            guard room || named else { continue }
            if named { stillNotified.insert(due.project) }
            let since = strangersSeen[due.project] ?? now
            seen[due.project] = since
            if now - since >= Self.strangerSeconds { try consider(due) } else { strangerWait = Self.strangerSeconds }
        }
        notifiedStrangers = stillNotified
        strangersSeen = seen
        let newlyDue = candidates.filter { !dueBefore.contains($0) || notified.contains($0) }
        let newSet = Set(newlyDue)
        dueBefore = Set(candidates)
        guard !candidates.isEmpty else { return Claim(jobs: [], heldBackFor: [wait, strangerWait].compactMap { $0 }.min()) }
        // Projects newly due first (a code of a project that was idle does not wait for the
        // rotation over those with backlogs), then the others from after the project the last
        // claim ended with.
        let rest = candidates.filter { !newSet.contains($0) }
        let start = rest.firstIndex { Self.key($0) > Self.key(lastServed) } ?? 0
        let ordered = newlyDue + Array(rest[start...] + rest[..<start])
        guard ordered.count > 1 else {
            lastServed = ordered[0]
            // One project: its claim as a worker of it alone makes it (FCM project tokens taken in
            // a transaction of their own while in a backlog, so the pool's claims do not queue on
            // its bucket's row).
            let claim = try claimFor(ordered[0], store, queues: queues, limit: limit, leaseSeconds: leaseSeconds, now: now)
            return Claim(jobs: claim.jobs, heldBackFor: [wait, claim.heldBackFor].compactMap { $0 }.min())
        }
        // Several: one statement for them all (herald.claim_projects), in this order, each its
        // share. The first 4 x limit / minimumShare of them are sent: a batch that each visit
        // fills with its share reaches a quarter of them, and visits that take less leave room
        // for the next; a thousand due projects do not make thousand-element parameters for the
        // thirty-two a batch of 256 reaches.
        let sent = Array(ordered.prefix(max(1, 4 * limit / Self.minimumShare)))
        var targets: [Claimer.ClaimTarget] = []
        targets.reserveCapacity(sent.count)
        for project in sent { targets.append(try target(project, store, now: now)) }
        let visits = try store.claimer.claimProjects(targets, queues: queues, limit: limit, leaseSeconds: leaseSeconds,
                                                     minimumShare: Self.minimumShare)
        var jobs: [ClaimedJob] = []
        var held = wait
        for visit in visits {
            jobs += visit.jobs
            if let wait = visit.heldBackFor { held = min(held ?? .infinity, wait) }
            guard var lane = lanes[visit.project] else { continue }
            lane.lastClaim = now
            lane.target.inBacklog = visit.wholeShare || visit.heldBackFor != nil
            if let rate = visit.rate, lane.adaptive.ceiling > 0 {
                lane.rateState = rate
                lane.rateReadAt = now
            }
            lanes[visit.project] = lane
        }
        // The rotation goes on after the last project it reached (projects newly due went first
        // out of turn, and do not move it).
        if let last = visits.last(where: { !newSet.contains($0.project) || rest.isEmpty }) { lastServed = last.project }
        return Claim(jobs: jobs, heldBackFor: held)
    }

    /// `project`'s claim target with its FCM project's rate in force now: the shared rate state
    /// read again once a second (another worker may have lowered it; a claim over several
    /// projects brings it back with its answer).
    private func target(_ project: String?, _ store: JobStore, now: Double) throws -> Claimer.ClaimTarget {
        guard var lane = lanes[project] else { return Claimer.ClaimTarget(project: project, fcmProject: nil, fcmProjectRate: 0) }
        if lane.adaptive.ceiling > 0, let fcmProject = lane.target.fcmProject {
            if now - lane.rateReadAt >= 1 {
                lane.rateState = try store.fcmProjectRates.state(fcmProject).rate
                lane.rateReadAt = now
            }
            lane.target.fcmProjectRate = lane.adaptive.rate(lane.rateState, now: now, started: lane.startedAt)
            if let project { metrics?.fcmProjectRate(lane.target.fcmProjectRate, project: project) } else { metrics?.fcmProjectRate(lane.target.fcmProjectRate) }
        }
        lanes[project] = lane
        return lane.target
    }

    private func claimFor(_ project: String?, _ store: JobStore, queues: [String], limit: Int, leaseSeconds: Double, now: Double) throws -> Claim {
        guard lanes[project] != nil else { return Claim(jobs: []) }
        var target = try target(project, store, now: now)
        let claim = try store.claimer.claimBatch(queues: queues, limit: limit, leaseSeconds: leaseSeconds, for: &target)
        lanes[project]?.target = target
        lanes[project]?.lastClaim = now
        return claim
    }

    /// NOTIFY payloads of `herald_jobs`: the projects named there (`-`: jobs of no project) are
    /// served first by the next claim. An empty payload (a promotion, a queue resumed) names none.
    /// `registry:NAME` (an entry corrected or resumed: herald.update_project, update_apns_app,
    /// resume_project_sending) makes this worker forget what it read of the entry and its lane,
    /// so its next claim of NAME takes it up afresh from the registry, with a key, key id, team
    /// or topic corrected while it was paused, instead of at the next reading of the registry.
    func notified(_ payloads: [String]) {
        for payload in payloads where !payload.isEmpty && notifiedProjects.count < 1024 {
            if payload.hasPrefix(Self.registryPayload) {
                entryChanged(String(payload.dropFirst(Self.registryPayload.count)))
                continue
            }
            for name in payload.split(separator: ",") { notifiedProjects.insert(name == "-" ? nil : String(name)) }
        }
    }

    static let registryPayload = "registry:"

    /// Registry entry `name` changed: what was read of it is forgotten (the next claim of it reads
    /// it again), a key that failed is looked at again at once, and it is served first.
    func entryChanged(_ name: String) {
        guard carries(name) else { return }
        if lanes[name] != nil {
            log.info("\(apnsRegistry[name] != nil ? "APNs app" : "project") \(name): its registry entry changed; taken up afresh at its next claim")
            drop(name)
        }
        registry[name] = nil
        apnsRegistry[name] = nil
        unknown.remove(name)
        broken[name] = nil
        notifiedProjects.insert(name)
    }

    /// Whether jobs of `project` go to APNs (an app this worker knows of; herald_messages_total's
    /// provider label).
    func isAPNsApp(_ project: String?) -> Bool {
        guard let project else { return false }
        return lanes[project]?.apns != nil || apnsRegistry[project] != nil
    }

    // MARK: Taking a project up

    /// Makes `project`'s lane if it has none: its entry, its key, its first token. False when it
    /// cannot be worked now (its key is broken, or it left the registry).
    private func prepare(_ project: String?, connection: PGConnection, now: Double) throws -> Bool {
        if lanes[project] != nil { return true }
        if project == nil {
            guard let unaddressed else { return false }
            lanes[nil] = Lane(keys: unaddressed, target: Claimer.ClaimTarget(project: nil, fcmProject: unaddressed.account.projectID,
                                                                             fcmProjectRate: configuration.maxRate),
                              adaptive: AdaptiveRate(ceiling: configuration.maxRate), startedAt: now, lastClaim: now)
            ring.put(unaddressed)
            return true
        }
        let name = project!
        if let known = broken[name], known.retryAt > now { return false }
        if let app = try apnsEntry(name, connection: connection) { return takeUp(app, connection: connection, now: now) }
        guard let entry = try entry(name, connection: connection) else { return false }
        guard let keys = load(entry, connection: connection, now: now) else { return false }
        ring.put(keys)
        log.info("project \(name): taken up, its jobs sent with its own key (\(keys.account.clientEmail)) to FCM project \(keys.account.projectID)")
        let ceiling = entry.maxRate ?? configuration.maxRate
        lanes[project] = Lane(keys: keys, target: Claimer.ClaimTarget(project: name, fcmProject: keys.account.projectID, fcmProjectRate: ceiling),
                              adaptive: AdaptiveRate(ceiling: ceiling), startedAt: now, lastClaim: now)
        if broken.removeValue(forKey: name) != nil, try Project.credentialsRestored(connection, name: name) {
            log.info("project \(name): its key works again; its pause for the key is lifted")
        }
        return true
    }

    /// The registry entry of `name`, from the last reading, or read now for a project added
    /// since (so it is worked at once, not at the next reading).
    private func entry(_ name: String, connection: PGConnection) throws -> Project? {
        if let known = registry[name] { return known }
        if apnsRegistry[name] != nil { return nil }
        if unknown.contains(name) { return nil }
        let entry = try ProjectRegistry.entry(connection, name: name)
        if entry == nil { unknown.insert(name) }
        if let entry {
            if registryRead { joined(name) }
            registry[name] = entry
        }
        return entry
    }

    func joined(_ name: String) {
        log.info("project \(name) joined the registry: its jobs are claimed here from now on")
    }

    /// Loads the key `entry` points at and fetches its first token; on failure, marks the
    /// project broken and, when the key itself is at fault, pauses it with the reason.
    private func load(_ entry: Project, connection: PGConnection, now: Double) -> ProjectKeys? {
        let name = entry.name
        let keyPath = entry.credentials.hasPrefix("env:") ? nil : entry.credentials
        do {
            let bytes = keyPath.flatMap { FileManager.default.contents(atPath: $0) }
            let account = configuration.endpoints.account(try entry.account(environment: ProcessInfo.processInfo.environment))
            if tokenClient == nil { tokenClient = try AccessTokenProvider.tokenClient(caFile: configuration.caFile) }
            let auth = AccessTokenProvider(account: account, caFile: configuration.caFile, client: tokenClient)
            do {
                _ = try auth.authorizationHeader()
            } catch where !error.refused {
                // The token endpoint is unreachable: not the key's fault; try again shortly.
                if broken[name] == nil { log.warning("project \(name): no access token yet (\(error)); trying again in \(Int(Self.keyRetrySeconds)) s") }
                broken[name] = Broken(reason: nil, retryAt: now + Self.keyRetrySeconds)
                return nil
            } catch {
                throw WorkerStartupError("cannot get an access token for \(account.clientEmail) from \(account.tokenURI): \(error)")
            }
            return ProjectKeys(project: name, account: account, auth: auth, fcmBaseURL: configuration.endpoints.fcm, keyPath: keyPath, keyBytes: bytes)
        } catch {
            refuse(name, why: "\(error)", connection: connection, now: now)
            return nil
        }
    }

    /// The key of `name` cannot be used: the project pauses (with `why`, which names the file or
    /// variable and never the key) until a look at it succeeds.
    func refuse(_ name: String, why: String, connection: PGConnection, now: Double) {
        var reason = why
        if reason.hasPrefix("project \(name): ") { reason.removeFirst("project \(name): ".count) }
        if broken[name]?.reason != reason {
            log.error("project \(name): \(reason); its jobs wait (the project is paused for its key) and the key is looked at again every \(Int(Self.keyRetrySeconds)) s")
            do { try Project.credentialsRefused(connection, name: name, why: reason) } catch {
                log.warning("project \(name): cannot record its pause (\(error))")
            }
        }
        broken[name] = Broken(reason: reason, retryAt: now + Self.keyRetrySeconds)
        drop(name)
    }

    func drop(_ project: String?) {
        lanes[project] = nil
        if project != nil || unaddressed == nil { ring.remove(project) }
        if let project { ring.apns.remove(project) }
        // Its row of the slot keeps its counts until another project needs the row.
        if let project { metrics?.projectDropped(project) }
    }

    // MARK: Upkeep

    /// The registry read again every `registryInterval`: a project that left it is dropped, a
    /// changed entry (its key's place, its FCM project, its max_rate) taken up afresh.
    private func readRegistryIfDue(_ connection: PGConnection, now: Double) throws {
        if now - keysCheckedAt >= Self.keyRetrySeconds {
            keysCheckedAt = now
            checkKeyFiles(connection, now: now)
            dropIdle(now: now)
        }
        guard now - registryReadAt >= registryInterval else { return }
        registryReadAt = now
        var read: [String: Project] = [:]
        for project in try ProjectRegistry.list(connection) { read[project.name] = project }
        var apps: [String: APNsApp] = [:]
        for app in try APNsApps.list(connection) { apps[app.name] = app }
        for (name, lane) in lanes.compactMap({ pair in pair.key.map { ($0, pair.value) } }) {
            if let keys = lane.apns {
                reread(name, keys, entry: apps[name])
                continue
            }
            guard let entry = read[name] else {
                log.info("project \(name) left the registry: its jobs are no longer claimed here")
                drop(name)
                continue
            }
            if let before = registry[name], before.credentials != entry.credentials || before.fcmProjectID != entry.fcmProjectID || before.maxRate != entry.maxRate {
                drop(name)  // taken up again from the new entry at its next claim
            }
        }
        for name in broken.keys where read[name] == nil && apps[name] == nil { broken[name] = nil }
        if registryRead {
            for name in read.keys.sorted() where registry[name] == nil && carries(name) { joined(name) }
        }
        registryRead = true
        registry = read
        apnsRegistry = apps
        unknown.removeAll()
    }

    /// Every held project's key file, compared with what its key was read from: a new key of
    /// the same FCM project replaces the keys in place; a file that became unusable pauses the
    /// project.
    private func checkKeyFiles(_ connection: PGConnection, now: Double) {
        for (project, lane) in lanes {
            if let name = project, let keys = lane.apns {
                checkKeyFile(name, keys, connection: connection, now: now)
                continue
            }
            guard let name = project, let path = lane.keys?.keyPath else { continue }
            let bytes = FileManager.default.contents(atPath: path)
            if bytes == lane.keys?.keyBytes { continue }
            guard let entry = registry[name] else { continue }
            guard let keys = load(entry, connection: connection, now: now) else { continue }  // load paused it, naming why
            log.info("project \(name): the key file \(path) changed (a new key of \(keys.account.clientEmail)); its jobs go out with it from now on")
            ring.put(keys, replacing: lane.keys)
            lanes[project]?.keys = keys
        }
    }

    /// Projects that claimed nothing for `idleSeconds` and hold no pause are dropped with their
    /// keys; the next due job takes the project up again.
    private func dropIdle(now: Double) {
        for (project, lane) in lanes where project != nil && now - lane.lastClaim >= Self.idleSeconds && !lane.pause.isPaused(at: now) {
            drop(project)
        }
    }

    // MARK: The sender's reports

    /// A project's pause or quota answer from the sender: its claims stop until the pause ends,
    /// and the pause (or the lowered rate) is shared with every worker of its FCM project. An
    /// APNs app's outage pause is shared the same way, under its bucket's key
    /// (`APNsApp.rateBucket`), which every claim of the app passes as its FCM project.
    func handle(_ project: String?, _ event: SenderEvent, rates: FCMProjectRates, workerID: String, now: Double) throws {
        guard var lane = lanes[project], let fcmProject = lane.target.fcmProject else { return }
        defer { lanes[project] = lane }
        switch event {
        case .projectPaused(let until, let reason):
            lane.pause.extend(to: until, reason: reason, byQuota: false, now: now)
            guard until > lane.published + 0.02, until > now else { return }
            try rates.hold(fcmProject, seconds: until - now, reason: "\(reason) answered to \(workerID)")
            lane.published = until
            // This project's held retries come back over the jitter window after its pause, not
            // at once; the other projects' keep their times.
            let window = max(1, (until - now) * configuration.retryPolicy.jitter)
            let spread = try rates.spreadHeldRetries(project: project, fcmProject: fcmProject, until: until, window: window)
            if spread > 0 { log.info("\(ProjectKeys.label(project)): \(spread) held retries spread over \(String(format: "%.1f", window)) s after its pause") }
        case .projectQuota(let accepted, let proven, let stated):
            // An APNs app's rate is never lowered (APNs states no project quota to find).
            guard lane.adaptive.ceiling > 0, lane.apns == nil else { return }
            let state = try rates.state(fcmProject).rate
            lane.rateState = state
            lane.rateReadAt = now
            if let stated {
                if let target = lane.adaptive.stated(state, perSecond: stated, now: now, started: lane.startedAt),
                   let set = try rates.stateQuota(fcmProject, to: target, ceiling: lane.adaptive.ceiling) {
                    lane.rateState = set
                    log.warning("\(ProjectKeys.label(project)): FCM project \(fcmProject)'s quota answer states \(StoreLoop.figure(stated))/s; it now sends at most \(StoreLoop.figure(lane.adaptive.rate(set, now: now, started: lane.startedAt)))/s")
                }
            } else if let target = lane.adaptive.lowered(state, now: now, accepted: accepted ?? .infinity, proven: proven ?? 0, started: lane.startedAt) {
                if let lowered = try rates.lower(fcmProject, to: target, since: state.at, ceiling: lane.adaptive.ceiling) {
                    lane.rateState = lowered
                    log.warning("\(ProjectKeys.label(project)): FCM project \(fcmProject): send rate lowered to \(Int((lowered.adapted ?? 0).rounded()))/s after a quota answer (ceiling \(Int(lane.adaptive.ceiling.rounded()))/s); it rises again while FCM accepts")
                } else {
                    lane.rateReadAt = -Double.infinity
                }
            }
        case .quotaWindowSpent(let until, let seenAt):
            guard lane.adaptive.ceiling > 0, lane.apns == nil else { return }
            if let state = try rates.holdWindow(fcmProject, until: until, seenAt: seenAt, ceiling: lane.adaptive.ceiling) {
                lane.rateState = state
                lane.rateReadAt = now
            }
        case .quotaWindowRenewed(let seenAt):
            guard lane.adaptive.ceiling > 0, lane.apns == nil else { return }
            if let state = try rates.endWindowHold(fcmProject, seenAt: seenAt) {
                lane.rateState = state
                lane.rateReadAt = now
            }
        default:
            break
        }
    }

    // MARK: Draining

    /// Whether a project this worker carries (and can work: not paused) has a job due, and
    /// what waits beyond the horizon, over them all.
    func pendingWork(_ claimer: Claimer, connection: PGConnection, queues: [String], horizon: Double) throws -> Claimer.PendingWork {
        var projects: [String?] = unaddressed == nil ? [] : [nil]
        var paused: [String] = []
        for entry in try ProjectRegistry.list(connection) where carries(entry.name) {
            if entry.pausedReason == nil { projects.append(entry.name) } else { paused.append(entry.name) }
        }
        for app in try APNsApps.list(connection) where carries(app.name) {
            if app.pausedReason == nil { projects.append(app.name) } else { paused.append(app.name) }
        }
        var total = Claimer.PendingWork(due: false)
        let saved = claimer.project
        defer { claimer.project = saved }
        // A paused entry's due jobs wait: the drain's last line names the entries holding some.
        for name in paused.sorted() {
            claimer.project = name
            if try claimer.pendingWork(queues: queues, horizon: horizon).due { total.paused.append(name) }
        }
        for project in projects {
            claimer.project = project
            let work = try claimer.pendingWork(queues: queues, horizon: horizon)
            if work.due { return work }
            total.later += work.later
            if let next = work.nextDueIn { total.nextDueIn = min(total.nextDueIn ?? next, next) }
        }
        return total
    }
}
