import Atomics
import Foundation
import TilepackCore
import TilepackStorage

/// The fixed table of served archives, built once at start. Request paths are only ever looked
/// up in it: no part of a request reaches the file system.
final class ArchiveCatalog: Sendable {
    /// The slots in the order the archives were given.
    let slots: [ArchiveSlot]
    private let byName: [String: ArchiveSlot]

    /// Opens every archive; a name given twice, reserved or empty is an error, as is a file or
    /// remote object that does not open.
    init(paths: [String], remote: RemoteSettings = RemoteSettings()) throws(TileServerError) {
        guard !paths.isEmpty else { throw TileServerError("no archive to serve: give one or more .mbtiles or .tilepack files") }
        var slots: [ArchiveSlot] = []
        var byName: [String: ArchiveSlot] = [:]
        for path in paths {
            let location = try RemoteLocation(path)
            let name = Self.name(of: location?.fileName ?? path)
            guard !name.isEmpty, name != ".", name != "..", name != "_" else {
                throw TileServerError("\(path): the name '\(name)' cannot be served (rename the file)")
            }
            if let other = byName[name] {
                throw TileServerError("\(path) and \(other.path) would both be served as '\(name)': rename one of them")
            }
            let slot: ArchiveSlot
            if let location {
                slot = ArchiveSlot(
                    name: name, path: path, remote: location, settings: remote,
                    generation: try ArchiveGeneration.open(name: name, remote: location, settings: remote))
            } else {
                slot = ArchiveSlot(
                    name: name, path: path, settings: remote,
                    generation: try ArchiveGeneration.open(name: name, path: path, signature: remote.signature))
            }
            slots.append(slot)
            byName[name] = slot
        }
        self.slots = slots
        self.byName = byName
    }

    func slot(named name: Substring) -> ArchiveSlot? { byName[String(name)] }

    /// The name an archive is served under: its file name without the extension.
    static func name(of path: String) -> String {
        let file = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
        guard let dot = file.lastIndex(of: "."), dot != file.startIndex else { return file }
        return String(file[..<dot])
    }
}

/// How remote archives are read and rechecked.
struct RemoteSettings: Sendable {
    var store = RemoteStore()
    /// Bytes of each remote archive's ranges kept (directories, tiles).
    var cacheBytes = 64 << 20
    /// Seconds between looks at each remote object's version.
    var recheckInterval = 60.0
    /// How long one request to the store may take (each is tried twice).
    var timeout: Duration = .seconds(10)
    /// `--key`: each archive's tiles checked against its signed root (`ARCHIVE.tpsig`).
    var signature: SignatureCheck?
}

/// `serve --key`: the publisher's key and the lowest release served.
struct SignatureCheck: Sendable {
    var key: VerifierKey
    var minimumRelease: UInt64

    /// The key of `path`; an unreadable or malformed key file is an error naming it.
    init(keyPath path: String, minimumRelease: UInt64) throws(TileServerError) {
        do { key = try VerifierKey(contentsOf: path) } catch { throw TileServerError("--key: \(error)") }
        self.minimumRelease = minimumRelease
    }

    /// `archive` checked against `sidecar` (its `.tpsig`): its signed root, release and metadata
    /// now, each tile on its first read.
    func verified(_ archive: any TileArchive, sidecar: any ByteSource) throws -> any TileArchive {
        try VerifiedTileArchive(base: archive, key: key, minimumRelease: minimumRelease, sidecar: sidecar)
    }

    /// `archive` checked against the file `PATH.tpsig` beside the archive file given as `path`.
    func verified(_ archive: any TileArchive, path: String) throws -> any TileArchive {
        try VerifiedTileArchive(base: archive, key: key, minimumRelease: minimumRelease, sidecarPath: path + ".tpsig")
    }
}

/// One served archive: its current generation, replaced when the file (or remote object) is.
final class ArchiveSlot: Sendable {
    let name: String
    let path: String
    /// Where a remote archive is, and how it is read; `nil` for a file.
    let remote: RemoteLocation?
    let settings: RemoteSettings
    /// When the remote object is looked at next (uptime, ns).
    private let nextRemoteCheck = ManagedAtomic<UInt64>(0)

    /// What the last check of the file found.
    struct Status: Sendable {
        var generation: ArchiveGeneration
        /// An identity seen once and not yet opened: opened when the next check sees it unchanged,
        /// so that a file still being written in place is not picked up half-written.
        var pendingIdentity: FileIdentity?
        /// The identity whose opening failed, not tried again until the file changes once more.
        var failedIdentity: FileIdentity?
        /// Why the file on disk is not what is served, if it is not.
        var problem: String?
        var reloads = 0
    }

    private let status: Locked<Status>
    /// `status.generation`, published for requests without a lock: every request reads it, on
    /// every event loop, and a lock shared by the loops made one wait for another that the
    /// scheduler had just taken off its core (milliseconds of tail latency). Stored under the
    /// lock each time `status.generation` changes.
    private let published: ManagedAtomic<ArchiveGeneration>

    init(
        name: String, path: String, remote: RemoteLocation? = nil, settings: RemoteSettings = RemoteSettings(),
        generation: ArchiveGeneration
    ) {
        self.name = name
        self.path = path
        self.remote = remote
        self.settings = settings
        self.status = Locked(Status(generation: generation))
        self.published = ManagedAtomic(generation)
        scheduleRemoteCheck()
    }

    private func scheduleRemoteCheck() {
        let interval = UInt64(max(settings.recheckInterval, 0) * 1e9)
        nextRemoteCheck.store(DispatchTime.now().uptimeNanoseconds &+ interval, ordering: .relaxed)
    }

    /// The generation requests starting now use.
    var current: ArchiveGeneration { published.load(ordering: .acquiring) }

    /// Makes `generation` the current one (under the status lock).
    private func publish(_ generation: ArchiveGeneration, in status: inout Status) {
        status.generation = generation
        published.store(generation, ordering: .releasing)
    }

    var snapshot: Status { status.withLock { $0 } }

    /// A newer generation than `old` when the file was replaced: the current one if the watcher
    /// already swapped it in, else the file opened now (a request that failed on `old` asks, so
    /// as to answer from the new file rather than fail). `nil` when the file is unchanged.
    func replacement(of old: ArchiveGeneration) -> ArchiveGeneration? {
        let now = current
        if now !== old { return now }
        let opened: ArchiveGeneration?
        if let remote {
            guard let version = try? remote.currentVersion(settings),
                .object(version) != old.identity
            else { return nil }
            opened = try? ArchiveGeneration.open(name: name, remote: remote, settings: settings)
        } else {
            guard case .success(let identity) = FileIdentity.of(path: path), .file(identity) != old.identity else { return nil }
            opened = try? ArchiveGeneration.open(name: name, path: path, signature: settings.signature)
        }
        guard let generation = opened else { return nil }
        return status.withLock { status in
            // Another request or the watcher may have swapped meanwhile: keep the first one in.
            if status.generation === old {
                publish(generation, in: &status)
                status.pendingIdentity = nil
                status.failedIdentity = nil
                status.problem = nil
                status.reloads += 1
            }
            return status.generation
        }
    }

    /// What happened at a check.
    enum CheckResult: Equatable, Sendable {
        case unchanged
        case reloaded
        case failed(String)
    }

    /// Looks at the file once: a new identity seen on two checks in a row is opened and becomes
    /// the current generation. Called by the watcher, off the request threads (opening may take a
    /// while). When the file is gone or does not open, the last good generation stays served.
    func check() -> CheckResult {
        if let remote { return checkRemote(remote) }
        let snapshot = self.snapshot
        switch FileIdentity.of(path: path) {
        case .failure(let error):
            let problem = "\(path): cannot be read now (\(error)); serving the version opened before"
            status.withLock {
                $0.problem = problem
                $0.pendingIdentity = nil
            }
            return snapshot.problem == problem ? .unchanged : .failed(problem)
        case .success(let identity):
            if .file(identity) == snapshot.generation.identity {
                status.withLock {
                    $0.pendingIdentity = nil
                    $0.problem = nil
                    $0.failedIdentity = nil
                }
                return .unchanged
            }
            if identity == snapshot.failedIdentity { return .unchanged }
            guard identity == snapshot.pendingIdentity else {
                status.withLock { $0.pendingIdentity = identity }
                return .unchanged
            }
            do {
                let generation = try ArchiveGeneration.open(name: name, path: path, signature: settings.signature)
                status.withLock {
                    publish(generation, in: &$0)
                    $0.pendingIdentity = nil
                    $0.failedIdentity = nil
                    $0.problem = nil
                    $0.reloads += 1
                }
                return .reloaded
            } catch {
                let problem = "\(error.message); serving the version opened before"
                status.withLock {
                    $0.failedIdentity = identity
                    $0.pendingIdentity = nil
                    $0.problem = problem
                }
                return .failed(problem)
            }
        }
    }
    /// Looks at the remote object's version when its interval is up: another version is opened
    /// at once (an object in a store is replaced whole, never written in place) and becomes the
    /// current generation. When the store does not answer or the new version does not open, the
    /// last good generation stays served.
    private func checkRemote(_ remote: RemoteLocation) -> CheckResult {
        guard DispatchTime.now().uptimeNanoseconds >= nextRemoteCheck.load(ordering: .relaxed) else { return .unchanged }
        defer { scheduleRemoteCheck() }
        let snapshot = self.snapshot
        let problem: String
        do {
            let version = try remote.currentVersion(settings)
            if .object(version) == snapshot.generation.identity {
                status.withLock { $0.problem = nil }
                return .unchanged
            }
            let generation = try ArchiveGeneration.open(name: name, remote: remote, settings: settings)
            status.withLock {
                // A request that found the object replaced may have swapped it in already.
                if $0.generation === snapshot.generation {
                    publish(generation, in: &$0)
                    $0.reloads += 1
                }
                $0.problem = nil
            }
            return .reloaded
        } catch let error as TileArchiveError {
            problem = "\(remote.text): cannot be checked now (\(error.fault)); serving the version opened before"
        } catch let error as TileServerError {
            problem = "\(error.message); serving the version opened before"
        } catch {
            problem = "\(remote.text): \(error); serving the version opened before"
        }
        status.withLock { $0.problem = problem }
        return snapshot.problem == problem ? .unchanged : .failed(problem)
    }
}
