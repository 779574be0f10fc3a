import Foundation

// Usage: EmbedSQL OUTPUT.swift FILE.sql...
// Writes `enum EmbeddedMigrations { static let all: [(name: String, sql: String)] }` with each
// file's text as a raw string literal, in the order given.
let arguments = CommandLine.arguments.dropFirst()
guard let output = arguments.first else {
    FileHandle.standardError.write("usage: EmbedSQL OUTPUT.swift FILE.sql...\n".data(using: .utf8)!)
    exit(2)
}
var source = "// Generated from migrations/*.sql by the EmbedMigrations plugin. Do not edit.\n"
source += "enum EmbeddedMigrations {\n    static let all: [(name: String, sql: String)] = [\n"
for path in arguments.dropFirst() {
    let url = URL(fileURLWithPath: path)
    let text = try String(contentsOf: url, encoding: .utf8)
    // A delimiter of more #s than any run in the text keeps the literal raw whatever it holds.
    var hashes = "#"
    while text.contains("\"" + hashes) || text.contains(hashes + "\"") { hashes += "#" }
    source += "        (name: \"\(url.deletingPathExtension().lastPathComponent)\", sql: \(hashes)\"\"\"\n"
    source += text
    if !text.hasSuffix("\n") { source += "\n" }
    source += "\"\"\"\(hashes)),\n"
}
source += "    ]\n}\n"
try source.write(toFile: output, atomically: true, encoding: .utf8)
