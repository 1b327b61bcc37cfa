import Foundation

/// The POSIX calls tilepack makes on paths, taking the path as a `String` that may hold escaped
/// bytes (see ``PathBytes``): each passes the path's exact bytes to the system, so a name that is
/// not UTF-8 is opened, created and renamed as itself, never as a repaired look-alike.
package enum FileSystem {
    /// Calls `body` with the path's bytes as a C string.
    package static func withPath<R>(_ path: String, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        if !PathBytes.hasEscapes(path) { return try path.withCString(body) }
        let bytes = PathBytes.bytes(of: path).map { CChar(bitPattern: $0) } + [0]
        return try bytes.withUnsafeBufferPointer { try body($0.baseAddress!) }
    }

    package static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
        withPath(path) { Foundation.open($0, flags, mode) }
    }

    package static func openat(_ folder: Int32, _ name: String, _ flags: Int32) -> Int32 {
        withPath(name) { Foundation.openat(folder, $0, flags) }
    }

    /// `stat(2)` (following links), or `nil` with `errno` set.
    package static func stat(_ path: String) -> Foundation.stat? {
        var info = Foundation.stat()
        return withPath(path) { systemStat($0, &info) } == 0 ? info : nil
    }

    /// `lstat(2)` (the link itself), or `nil` with `errno` set.
    package static func lstat(_ path: String) -> Foundation.stat? {
        var info = Foundation.stat()
        return withPath(path) { systemLstat($0, &info) } == 0 ? info : nil
    }

    package static func mkdir(_ path: String, _ mode: mode_t) -> Int32 { withPath(path) { Foundation.mkdir($0, mode) } }
    package static func unlink(_ path: String) -> Int32 { withPath(path) { Foundation.unlink($0) } }
    package static func access(_ path: String, _ mode: Int32) -> Int32 { withPath(path) { Foundation.access($0, mode) } }

    package static func rename(_ from: String, _ to: String) -> Int32 {
        withPath(from) { source in withPath(to) { Foundation.rename(source, $0) } }
    }

    /// The path with every link resolved, or `nil` (dangling, unreadable).
    package static func realpath(_ path: String) -> String? {
        guard let pointer = withPath(path, { Foundation.realpath($0, nil) }) else { return nil }
        defer { free(pointer) }
        return PathBytes.string(from: UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
    }

    #if os(Linux)
    /// What `opendir` returns: Glibc's `DIR` is incomplete, so Swift sees an opaque pointer.
    package typealias DirectoryStream = OpaquePointer
    #else
    /// What `opendir` returns: Darwin's `DIR` is a complete struct.
    package typealias DirectoryStream = UnsafeMutablePointer<DIR>
    #endif

    package static func opendir(_ path: String) -> DirectoryStream? {
        withPath(path) { Foundation.opendir($0) }
    }

    /// The names in a folder other than `.` and `..`, each with whether the listing says it is a
    /// regular file (`d_type`), bytes kept; `nil` when the folder cannot be opened (`errno` set).
    package static func entries(_ path: String) -> [(name: String, isRegularFile: Bool)]? {
        guard let dir = opendir(path.isEmpty ? "." : path) else { return nil }
        defer { closedir(dir) }
        var result: [(name: String, isRegularFile: Bool)] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: entry.pointee.d_name)) {
                    // UTF-8 names (nearly all) the fast way; the rest keep their bytes.
                    String(validatingCString: $0) ?? PathBytes.string(from: UnsafeRawBufferPointer(start: $0, count: strlen($0)))
                }
            }
            if name == "." || name == ".." { continue }
            result.append((name, Int32(entry.pointee.d_type) == Int32(DT_REG)))
        }
        return result
    }

    /// The folder part of a path (`.` for a bare name) and its last component, split at the last `/`.
    package static func split(_ path: String) -> (folder: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let folder = String(path[..<slash])
        return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
    }

    /// The longest file name (bytes) Linux, macOS and the BSDs take: NAME_MAX.
    package static let maximumNameLength = 255

    /// The start of a temporary file's name beside a file called `name`: `.<name><marker>`, with
    /// `name` cut at a character boundary so that this, 13 random characters (a `UInt64` in base 36)
    /// and the longest suffix a temporary file gets (SQLite's `-journal`) fit in
    /// ``maximumNameLength`` for any name that fits itself.
    package static func temporaryPrefix(for name: String, marker: String = temporaryMarker) -> String {
        let budget = maximumNameLength - 1 - marker.utf8.count - 13 - "-journal".utf8.count
        var kept = Substring(name)
        while kept.utf8.count > budget { kept = kept.dropLast() }
        return "." + kept + marker
    }

    /// The marker of a file being written beside its destination: `.<name>.tmp-<random>`.
    package static let temporaryMarker = ".tmp-"

    /// A new name beside `destination` for a file to be written and then renamed over it:
    /// `.<name>.tmp-<random>` (the name cut to fit NAME_MAX: ``temporaryPrefix(for:marker:)``) in the destination's folder, so the rename is atomic on one file system.
    package static func temporaryPath(beside destination: String) -> String {
        let (folder, name) = split(destination)
        return folder + "/" + temporaryPrefix(for: name) + String(UInt64.random(in: 0...UInt64.max), radix: 36)
    }

    /// What ``replace(_:with:)`` was doing when it failed, with `errno`.
    package enum ReplaceFailure: Error, Sendable {
        /// Creating the temporary file beside the destination.
        case create(errno: Int32)
        /// Writing into it.
        case write(errno: Int32)
        /// Renaming it over the destination.
        case rename(errno: Int32)
    }

    /// Write beside and rename, for a file whose bytes are in hand: `bytes` go to a new temporary
    /// file beside `path` (`O_EXCL | O_NOFOLLOW`), renamed over `path` when complete. Whatever `path`
    /// was (a file, a hard link to a file elsewhere, a symbolic link) is replaced, never opened or
    /// truncated, and a reader sees the old file or the whole new one. A failure removes the
    /// temporary file. (A file written piece by piece, with fsync: Storage's `AtomicFile`.)
    package static func replace(_ path: String, with bytes: UnsafeRawBufferPointer) throws(ReplaceFailure) {
        let temporary = temporaryPath(beside: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .create(errno: errno) }
        var done = 0
        while done < bytes.count {
            let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                close(fd)
                _ = unlink(temporary)
                throw .write(errno: code)
            }
            done += n
        }
        close(fd)
        if rename(temporary, path) != 0 {
            let code = errno
            _ = unlink(temporary)
            throw .rename(errno: code)
        }
    }

    /// ``replace(_:with:)`` for bytes in an array.
    package static func replace(_ path: String, with bytes: [UInt8]) throws(ReplaceFailure) {
        let failure: ReplaceFailure? = bytes.withUnsafeBytes { buffer in
            do throws(ReplaceFailure) {
                try replace(path, with: buffer)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Writes `data` to a new file at `path` (it must not exist).
    package static func createFile(_ path: String, contents data: Data) -> Int32? {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        var done = 0
        while done < data.count {
            let n = data.withUnsafeBytes { write(fd, $0.baseAddress! + done, data.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += n
        }
        return nil
    }
}

// The C calls, named apart from ``FileSystem``'s own (inside it `stat` is its method).
private func systemStat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { stat(path, &info) }
private func systemLstat(_ path: UnsafePointer<CChar>, _ info: inout stat) -> Int32 { lstat(path, &info) }
