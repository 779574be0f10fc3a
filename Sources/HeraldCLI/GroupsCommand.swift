import CommandOptions
import FCM
import Foundation
import HTTPClient
import JSON
import Postgres
import Queue
import Worker

enum GroupsCommand {
    static let options: [Option] = [
        Option(name: "name", value: "NAME", help: "The group's notification_key_name."),
        Option(name: "token", value: "TOKEN", repeatable: true, help: "A member registration token."),
        Option(name: "key", value: "KEY", help: "The group's notification_key (add/remove; looked up when not given)."),
        emulatorOption,
    ] + withHelp(connectionOptions, [
        "database-url": "The PostgreSQL whose herald.device_groups is kept in step. Unset: only FCM is changed; no PostgreSQL is started.",
        "credentials": "Service-account JSON (project_id, client_email, private_key, token_uri). Required, except with --emulator.",
        "data-dir": "With --emulator: where the emulator's service account is written.",
    ])

    static let help = helpText(
        command: "groups", summary: "Manage FCM device groups and keep herald.device_groups in step.",
        usage: "(create|add|remove|get) --name NAME [--token T ...] [--key KEY]",
        options: options,
        footer: """
        create/add/remove/get print the group as JSON: {"name", "notification_key", "members"}.
        A group has at most 20 members; Herald refuses more before calling FCM. Removing every member
        deletes the group. With DATABASE_URL set, herald.device_groups is updated too; without it only
        FCM is changed (no private PostgreSQL is started). From SQL, use
        herald.enqueue_group_op(operation, name, tokens) and the worker runs it with retries.
        Send to a group by putting its notification_key in a message's token.
        Needs GOOGLE_APPLICATION_CREDENTIALS (or --credentials); --emulator talks to a local FCM
        emulator started for the call instead (for trying it out: its groups vanish with it).
        """)

    static func run(arguments: [String]) throws -> Int32 {
        let parsed = try parse(command: "groups", arguments: arguments, options: options, positional: true)
        guard let operation = parsed.positional.first, ["create", "add", "remove", "get"].contains(operation), parsed.positional.count == 1 else {
            throw UsageError("herald groups: give one operation: create, add, remove or get (see herald groups --help)")
        }
        guard let name = parsed.string("name"), !name.isEmpty else {
            throw UsageError("herald groups \(operation): --name is required (the group's notification_key_name)")
        }
        let tokens = Array(NSOrderedSet(array: parsed.all("token"))) as! [String]
        if operation != "get" && tokens.isEmpty {
            throw UsageError("herald groups \(operation): give at least one --token")
        }
        let log = try RunEnvironment.logger(parsed, prefix: "herald groups")
        // FCM settings first: without credentials nothing else is looked at.
        let environment = RunEnvironment(log: log)
        defer { environment.shutdown() }
        let fcm = try environment.connectFCM(parsed)
        let connection: PGConnection? = try checkedDatabaseURL(parsed).map { url throws -> PGConnection in
            do { return try PGConnection(url: url) } catch { throw databaseProblem(error, command: "groups") }
        }
        let known = try connection.flatMap { connection throws -> Administration.DeviceGroup? in
            try Administration.deviceGroup(connection, name: name)
        }
        // FCM's rules (the 20-member limit), checked before FCM is called, as the worker checks them.
        var plan: DeviceGroupPlan?
        if let change = DeviceGroupOperation(rawValue: operation) {
            do {
                plan = try DeviceGroupPlan.make(operation: change, name: name, tokens: tokens,
                                                key: parsed.string("key") ?? known?.notificationKey, members: known?.members ?? [])
            } catch {
                throw UsageError("herald groups \(operation): \(error.message)")
            }
        }

        let client = DeviceGroupClient(endpoint: fcm.endpoint, auth: fcm.auth, client: fcm.client)
        do {
            var key: String?
            var members = known?.members ?? []
            if var plan {
                if plan.operation != .create && plan.key == nil { plan.key = try client.get(name: name) }
                if plan.operation != .create && plan.key == nil {
                    printError("herald groups \(operation): FCM has no device group named \(name); create it first")
                    return 1
                }
                let answered = try client.perform(plan)
                key = answered.isEmpty ? plan.key : answered
                members = plan.members(after: members)
                if let connection, let key {
                    let after = try Administration.recordGroupChange(connection, GroupChange(operation: plan.operation, name: name, key: key, tokens: plan.tokens))
                    members = after?.members ?? []
                }
            } else {
                key = try client.get(name: name)
                guard key != nil else {
                    printError("herald groups get: FCM has no device group named \(name)")
                    return 1
                }
            }
            var output = JSONObject()
            output["name"] = .string(name)
            output["notification_key"] = operation == "remove" && connection != nil && members.isEmpty ? .null : .string(key ?? "")
            if connection != nil || operation == "create" { output["members"] = .array(members.map { .string($0) }) }
            print(JSONValue.object(output).serialized)
            return 0
        } catch let error as DeviceGroupError {
            printError("herald groups \(operation): \(error.message)")
            return 1
        }
    }
}
