#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// An exclusive claim on a folder by one process at a time: an open lock file under `flock`,
/// held for as long as the process lives (the kernel lets go when it dies, however it dies). The
/// file names the holder (pid, command, start), so a second claimant can say who has it.
public final class FolderLock {
    public let path: String
    private let descriptor: Int32

    /// Who holds a lock that could not be taken.
    public struct Held: Error, CustomStringConvertible {
        public let path: String
        /// What the holder wrote into the lock file (its pid, command and start), if anything.
        public let holder: String

        public var description: String {
            holder.isEmpty ? "another process holds \(path)" : "\(holder) holds \(path)"
        }
    }

    /// The lock file could not be opened or created.
    public struct CannotOpen: Error, CustomStringConvertible {
        public let path: String
        public let reason: String
        public var description: String { "cannot open the lock file \(path): \(reason)" }
    }

    /// Takes the lock at `path` (created if missing) without waiting, recording `holder` in it.
    /// Throws `Held` when another process has it.
    public init(path: String, holder: String) throws {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw CannotOpen(path: path, reason: String(cString: strerror(errno)))
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            var bytes = [UInt8](repeating: 0, count: 512)
            let count = pread(fd, &bytes, bytes.count, 0)
            close(fd)
            let text = count > 0 ? String(decoding: bytes[0..<count], as: UTF8.self) : ""
            throw Held(path: path, holder: text.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        descriptor = fd
        _ = ftruncate(fd, 0)
        let line = Array((holder + "\n").utf8)
        _ = line.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    deinit {
        _ = ftruncate(descriptor, 0)
        close(descriptor)
    }
}
