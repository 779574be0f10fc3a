import CommandOptions
import Postgres
import Queue

/// What `herald projects` and `herald apns` share: the eight actions on one kind of entry of the
/// registry (herald.projects), and `set` for a kind with settings of its own to change in place,
/// the checks of their arguments, and the words pause, resume and remove print. Each command
/// gives its words and what differs between the kinds (add, show,
/// test, list, and the registry calls).
struct RegistryActions {
    /// The command word: `projects` or `apns`.
    var command: String
    /// What an entry is called in what is printed: `project`, `APNs app`.
    var noun: String
    /// The short name of an entry: `project`, `app` ("give one app name").
    var shortNoun: String
    /// The placeholder of the usage: `NAME`, `APP`.
    var placeholder: String
    /// Flags that belong to one action only, and that action.
    var actionOnlyFlags: [String: String]
    var list: (ParsedOptions) throws -> Void
    var add: (ParsedOptions, String) throws -> Int32
    var update: (ParsedOptions, String) throws -> Int32
    var show: (ParsedOptions, String) throws -> Int32
    var test: (ParsedOptions, String) throws -> Int32
    var pause: (PGConnection, _ name: String, _ reason: String?, _ source: String) throws -> Bool
    var resume: (PGConnection, _ name: String, _ source: String) throws -> Bool
    /// Returns how many pending jobs were dead-lettered (`force`).
    var remove: (PGConnection, _ name: String, _ force: Bool, _ source: String) throws -> Int
    /// `set NAME ...`: changes an entry's settings in place (nil: the kind has none to set).
    var set: ((ParsedOptions, String) throws -> Int32)? = nil

    static let actions = ["add", "update", "list", "show", "test", "pause", "resume", "remove"]

    func run(_ parsed: ParsedOptions) throws -> Int32 {
        guard let action = parsed.positional.first, Self.actions.contains(action) || (action == "set" && set != nil) else {
            let p = placeholder
            throw UsageError("herald \(command): give an action: add \(p), update \(p), list, show \(p), \(set != nil ? "set \(p), " : "")test \(p), pause \(p), resume \(p) or remove \(p); see herald \(command) --help")
        }
        let rest = Array(parsed.positional.dropFirst())
        for (flag, owners) in actionOnlyFlags.sorted(by: { $0.key < $1.key }) where parsed.values[flag] != nil || parsed.switches.contains(flag) {
            let allowed = owners.split(separator: ",").map(String.init)
            guard !allowed.contains(action) else { continue }
            throw UsageError("herald \(command) \(action): --\(flag) applies to \(allowed.joined(separator: " and ")) only")
        }
        if parsed.has("json") && !["list", "show"].contains(action) {
            throw UsageError("herald \(command) \(action): --json applies to list and show only")
        }
        if action == "list" {
            guard rest.isEmpty else { throw UsageError("herald \(command) list: takes no name") }
            try list(parsed)
            return 0
        }
        guard rest.count == 1 else {
            throw UsageError("herald \(command) \(action): give one \(shortNoun) name\(action == "add" ? "" : " (herald \(command) list shows them)")")
        }
        let name = rest[0]
        do {
            switch action {
            case "add": return try add(parsed, name)
            case "update": return try update(parsed, name)
            case "show": return try show(parsed, name)
            case "set": return try set!(parsed, name)
            case "test": return try test(parsed, name)
            case "pause":
                let reason = parsed.string("reason")
                let changed = try pause(try operationsDatabase(parsed), name, reason, shellSource())
                print(changed ? "paused \(noun) \(name)" : "\(noun) \(name) was paused already\(reason == nil ? "" : "; its reason is now the one given")")
            case "resume":
                let changed = try resume(try operationsDatabase(parsed), name, shellSource())
                print(changed ? "resumed \(noun) \(name)" : "\(noun) \(name) was not paused; nothing to resume")
            default:
                let force = parsed.has("force")
                let lettered = try remove(try operationsDatabase(parsed), name, force, shellSource())
                print("removed \(noun) \(name) from the registry (its key was left where it is)"
                      + (force ? "; \(lettered) pending job\(lettered == 1 ? "" : "s") dead-lettered with it (herald dead list --project \(name))" : ""))
            }
        } catch let error as AdminError {
            var hint = error.kind == .notFound ? "; herald \(command) list shows the registered \(shortNoun)s" : ""
            if action == "remove" && error.kind == .conflict {
                hint = "\n  Let them finish, or dead-letter them with it: herald \(command) remove \(name) --force"
            }
            throw UsageError("herald \(command) \(action): \(error.description)\(hint)")
        }
        return 0
    }
}
