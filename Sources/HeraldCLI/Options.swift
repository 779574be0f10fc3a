import CommandOptions
import Foundation
import Logging

func printError(_ text: String) {
    StandardStreams.write(text + "\n", to: 2)
}
