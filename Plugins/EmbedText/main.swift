import Foundation

// Usage: EmbedText OUTPUT.swift TYPE INPUT
// Writes `enum TYPE { static let text: String }` holding INPUT's text as a raw string literal.
// A `.json` input must parse, so a broken rules file fails the build rather than start-up.
let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 3 else {
    FileHandle.standardError.write("usage: EmbedText OUTPUT.swift TYPE INPUT\n".data(using: .utf8)!)
    exit(2)
}
let (output, typeName, input) = (arguments[0], arguments[1], arguments[2])
let text = try String(contentsOf: URL(fileURLWithPath: input), encoding: .utf8)
if input.hasSuffix(".json") {
    do {
        _ = try JSONSerialization.jsonObject(with: Data(text.utf8))
    } catch {
        FileHandle.standardError.write("\(input): error: not valid JSON: \(error)\n".data(using: .utf8)!)
        exit(1)
    }
}
// A delimiter of more #s than any run in the text keeps the literal raw whatever it holds
// (no closing delimiter, no escape sequence).
var hashes = "#"
while text.contains("\"" + hashes) || text.contains(hashes + "\"") || text.contains("\\" + hashes) { hashes += "#" }
var source = "// Generated from \(URL(fileURLWithPath: input).lastPathComponent) by a build plugin. Do not edit.\n"
source += "enum \(typeName) {\n    static let text: String = \(hashes)\"\"\"\n"
// The newline before the closing delimiter is not part of a multi-line literal, so the text
// comes back byte for byte.
source += text + "\n"
source += "\"\"\"\(hashes)\n}\n"
try source.write(toFile: output, atomically: true, encoding: .utf8)
