import APNs
import Foundation
import Postgres
import Queue

/// The store thread's side of the APNs apps a worker carries: an app (a registry row of service
/// 'apns') is taken up like an FCM project when it first has due jobs, as a lane of its own with
/// its own key. A key that cannot be used (missing, unreadable, not a P-256 key, named for
/// another key ID) pauses that app alone with the reason (`credentials: ...`, naming the file or
/// variable, never the key), looked at again every `keyRetrySeconds`; its first success lifts that
/// pause. A 403 of Apple's that every job of the app would meet (the sender's
/// `apnsAppRefused`) pauses the app until an operator resumes it. The sender's outage pause of
/// an app (its circuit open: APNs unreachable) is published to herald.project_pauses by
/// `handle` under the app's bucket key, as an FCM project's is, so every worker of every pool
/// holds the app's jobs until it ends.
extension StoreProjects {
    /// The APNs app `name`, from the last reading of the registry or read now (nil: not an APNs app).
    func apnsEntry(_ name: String, connection: PGConnection) throws -> APNsApp? {
        if let known = apnsRegistry[name] { return known }
        if registry[name] != nil || unknown.contains(name) { return nil }
        let app = try APNsApps.entry(connection, name: name)
        if let app {
            if registryRead { joined(name) }
            apnsRegistry[name] = app
        }
        return app
    }

    /// Makes the lane of APNs app `app`: its key read and checked, a first provider token signed.
    /// False when its key cannot be used (the app is then paused with the reason).
    func takeUp(_ app: APNsApp, connection: PGConnection, now: Double) -> Bool {
        let keys: APNsAppKeys
        do {
            keys = try APNsAppKeys.load(app, baseURL: configuration.endpoints.apns(app), tokens: ring.apns.tokens)
        } catch {
            refuse(app.name, why: error.description, connection: connection, now: now)
            return false
        }
        ring.apns.put(keys)
        log.info("APNs app \(app.name): taken up, its jobs sent to \(keys.deviceURL) with key \(app.keyID) of team \(app.teamID), topic \(app.topic)")
        // Its max_rate (else the pool's --max-rate) is spent from a bucket of its own in
        // herald.project_rates, shared by every pool as an FCM project's is. APNs states no
        // project quota to find, so the rate opens at the ceiling, without FCM's start ramp.
        let ceiling = app.maxRate ?? configuration.maxRate
        var adaptive = AdaptiveRate(ceiling: ceiling)
        adaptive.startRate = .infinity
        lanes[app.name] = Lane(keys: nil, apns: keys,
                               target: Claimer.ClaimTarget(project: app.name, fcmProject: app.rateBucket, fcmProjectRate: ceiling),
                               adaptive: adaptive, startedAt: now, lastClaim: now)
        do {
            if broken.removeValue(forKey: app.name) != nil, try Project.credentialsRestored(connection, name: app.name) {
                log.info("APNs app \(app.name): its key works again; its pause for the key is lifted")
            }
        } catch {
            log.warning("APNs app \(app.name): cannot lift its pause for the key (\(error))")
        }
        return true
    }

    /// A registry reading: an app that left it is dropped; one whose key, team, topic,
    /// environment or max_rate changed is taken up afresh at its next claim.
    func reread(_ name: String, _ keys: APNsAppKeys, entry: APNsApp?) {
        guard let entry else {
            log.info("APNs app \(name) left the registry: its jobs are no longer claimed here")
            drop(name)
            return
        }
        let before = keys.app
        if before.keyFile != entry.keyFile || before.keyID != entry.keyID || before.teamID != entry.teamID
            || before.topic != entry.topic || before.sandbox != entry.sandbox || before.maxRate != entry.maxRate {
            drop(name)
        }
    }

    /// The app's key file, compared with what its key was read from: a changed file is read
    /// again (an unusable one pauses the app, naming the file).
    func checkKeyFile(_ name: String, _ keys: APNsAppKeys, connection: PGConnection, now: Double) {
        guard let path = keys.keyPath else { return }
        if FileManager.default.contents(atPath: path) == keys.keyBytes { return }
        drop(name)
        guard let app = apnsRegistry[name], takeUp(app, connection: connection, now: now) else { return }
        log.info("APNs app \(name): the key file \(path) changed; its jobs go out with it from now on")
    }

    /// APNs refused the app in a way every job of it would meet (a 403 other than an expired
    /// provider token, TopicDisallowed, a URL that is not APNs's): the app is paused with the
    /// reason until an operator resumes it (`herald apns resume`), and dropped here.
    func apnsAppRefused(_ name: String, reason: String, connection: PGConnection, workerID: String) {
        guard lanes[name]?.apns != nil else { return }
        let correction = switch APNsAnswer.pauseCause(reason: reason) {
        case "apns_topic": "herald apns update \(name) --topic BUNDLE_ID"
        case "apns_url": "HERALD_APNS_URL (--apns-url)"
        default: "herald apns update \(name) (--team-id, --key-id, --key-file, --sandbox|--production)"
        }
        let text = "APNs: \(reason); fix it (\(correction)), then herald apns resume \(name)"
        log.error("APNs app \(name): paused: \(reason); correct it with \(correction), then herald apns resume \(name): its jobs wait until then")
        do {
            _ = try APNsApps.refused(connection, name: name, reason: text, cause: APNsAnswer.pauseCause(reason: reason),
                                     source: "herald work \(workerID)")
        } catch {
            log.warning("APNs app \(name): cannot record its pause (\(error))")
        }
        drop(name)
    }
}
