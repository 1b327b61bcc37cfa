import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A tmpfs of a given size mounted at a new folder, for tests of full and read-only file systems;
/// `nil` where mounting is not allowed (not root, no CAP_SYS_ADMIN). Tests that need one are
/// enabled only where ``canMount`` (the test runner then reports them skipped). Unmounted when
/// released.
public final class TmpfsMount {
    let dir: TemporaryDirectory
    public var path: String { dir.path }

    public init?(megabytes: Int = 16) {
        guard getuid() == 0, let dir = try? TemporaryDirectory("tilepack-tmpfs"),
            Self.run(["mount", "-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", dir.path])
        else { return nil }
        self.dir = dir
    }

    deinit { _ = Self.run(["umount", "-l", path]) }

    /// Whether a tmpfs can be mounted here, tried once.
    public static let canMount: Bool = TmpfsMount(megabytes: 1) != nil

    /// Remounts it read-only.
    public func makeReadOnly() -> Bool { Self.run(["mount", "-o", "remount,ro", path]) }

    /// Fills it until `free` bytes are left (within a page), with a file named `filler`.
    public func fill(leaving free: Int) throws {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { throw POSIXError(.EIO) }
        let available = Int(info.f_bavail) * Int(info.f_frsize)
        try Data(count: max(0, available - free)).write(to: URL(fileURLWithPath: path + "/filler"))
    }

    @discardableResult
    static func run(_ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }
}
