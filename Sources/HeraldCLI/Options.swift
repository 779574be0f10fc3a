import CommandOptions
import Foundation

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}
