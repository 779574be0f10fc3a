// Local wiring for trying the emulator by hand; the lead owns the real CLI.
import Emulator
import Glibc
let args = Array(CommandLine.arguments.dropFirst())
if args.first == "emulator" {
    do { exit(try EmulatorCommand.run(arguments: Array(args.dropFirst()))) } catch { print("herald emulator: \(error)"); exit(2) }
}
print("herald: under construction")
