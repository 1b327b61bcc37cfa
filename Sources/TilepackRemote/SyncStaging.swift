import Foundation
import TilepackChecksum
import TilepackCore
import TilepackHTTP
import TilepackStorage

/// A remote object read through a staging file beside the local copy it will replace
/// (Specs/updates.md §8.3): the ranges fetched for a sync are appended to the file as they arrive
/// and read back from it, so that an interrupted sync resumes with what it had, and no byte of the
/// object is downloaded twice while the object stays the same: a resume is bound to what was
/// fetched (its ETag, its length and its tile index's identity, ``bind(index:)``), never to the
/// URL it was reached by.
///
/// Reads outside the staged ranges (a header, a directory) go to the ``HTTPByteSource``;
/// ``stage(_:)`` fetches the ranges that are not staged yet, several in one request where the
/// server answers multiple ranges.
package final class StagedByteSource: ByteSource, @unchecked Sendable {
    package let remote: HTTPByteSource
    /// The staging file's path.
    package let path: String
    package var name: String { remote.name }
    package var count: Int { remote.count }

    let descriptor: Int32
    struct State {
        /// Staged ranges, ascending by their first byte, each with where its bytes are in the file.
        var ranges: [(range: Range<Int>, at: Int)] = []
        var end = 0
        var stagedBytes = 0
        /// An earlier sync's records of an object no ETag pins: used only once ``bind(index:)``
        /// finds the same index identity (the object's length is in the header).
        var pending: [(range: Range<Int>, at: Int)] = []
        var pendingBytes = 0
        /// The index identity the records are bound to (`none`: a full download), when bound.
        var bound: String?
        /// Where this sync's own records begin.
        var runStart = 0
        var headerLength = 0
        /// The sync plan recorded last (its JSON), if any (``recordPlan(_:)``).
        var plan: Data?
    }
    let state = Locked(State())
    /// The staged bytes of an earlier, interrupted sync that this one uses.
    package var resumedBytes: Int { state.withLock { $0.runStart > $0.headerLength ? $0.stagedBytes - $0.ownBytes : 0 } }
    /// Why an earlier staging file was not used (another object, a damaged record), if one was not.
    package private(set) var discarded: String?
    /// The object's ETag (`nil`: the server sends none, and only the index binds a resume).
    let etag: String?

    static let magic = Array("TPSYNC02".utf8)
    /// A record's offset field that marks the binding record (its bytes: the index identity).
    static let bindingMark = UInt64.max
    /// The mark of a plan record (its bytes: the sync plan's JSON, Specs/updates.md §8.1).
    static let planMark = UInt64.max - 1
    /// The mark of a discard record (its bytes: two 8-byte offsets, a range whose staged bytes a
    /// check found wrong and which is fetched again).
    static let discardMark = UInt64.max - 2

    /// Opens the staging file at `path` for `remote`: an earlier one of the same object (its ETag
    /// and size; without an ETag its size, the rest left to ``bind(index:)``) is resumed (its
    /// records checked; a torn last record cut off), any other is replaced. The URL is not part
    /// of it: the same object through another host, port or presigned URL resumes.
    package init(remote: HTTPByteSource, path: String) throws(TileArchiveError) {
        self.remote = remote
        self.path = path
        etag = remote.etag
        // The object the staged bytes are of: its ETag (or none) and its size.
        let header = Data("{\"etag\":\(remote.etag.map(Self.quoted) ?? "null"),\"size\":\(remote.count)}".utf8)
        let fd = FileSystem.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let code = errno
            throw TileArchiveError(
                path: path, fault: .io(errno: code, reason: "cannot create the staging file: \(AtomicFile.describe(errno: code))"))
        }
        descriptor = fd
        var loaded = State()
        var reason: String?
        let size = Int(lseek(fd, 0, SEEK_END))
        let headerBytes = Self.magic + Self.le32(header.count) + Array(header)
        if size > 0 {
            let existing = Self.pread(fd, offset: 0, length: min(size, headerBytes.count))
            if existing == headerBytes {
                var at = headerBytes.count
                while at + 16 <= size {
                    let head = Self.pread(fd, offset: at, length: 16)
                    let mark = Self.get64(head, 0), length = Int(Self.get32(head, 8)), crc = Self.get32(head, 12)
                    let offset = Int(truncatingIfNeeded: mark)
                    guard length > 0, at + 16 + length <= size, mark >= Self.discardMark || (offset >= 0 && offset <= remote.count - length)
                    else { break }
                    let bytes = Self.pread(fd, offset: at + 16, length: length)
                    guard bytes.withUnsafeBytes({ CRC32.checksum($0) }) == crc else { break }
                    if mark == Self.bindingMark {
                        loaded.bound = String(decoding: bytes, as: UTF8.self)
                    } else if mark == Self.planMark {
                        loaded.plan = Data(bytes)
                    } else if mark == Self.discardMark {
                        let low = Int(truncatingIfNeeded: Self.get64(bytes, 0)), high = Int(truncatingIfNeeded: Self.get64(bytes, 8))
                        guard length == 16, low >= 0, low <= high else { break }
                        loaded.discard(low..<high)
                    } else if remote.etag != nil {
                        loaded.ranges.append((offset..<(offset + length), at + 16))
                        loaded.stagedBytes += length
                    } else {
                        loaded.pending.append((offset..<(offset + length), at + 16))
                        loaded.pendingBytes += length
                    }
                    at += 16 + length
                }
                if at < size { _ = ftruncate(fd, off_t(at)) }
                loaded.end = at
            } else {
                reason =
                    "\(path) held bytes of another object or version (\(String(decoding: existing.dropFirst(12), as: UTF8.self))): started again"
            }
        }
        if loaded.end == 0 {
            _ = ftruncate(fd, 0)
            try Self.write(fd, headerBytes, at: 0, path: path)
            loaded = State(ranges: [], end: headerBytes.count, stagedBytes: 0)
        }
        loaded.ranges.sort { $0.range.lowerBound < $1.range.lowerBound }
        loaded.headerLength = headerBytes.count
        loaded.runStart = loaded.end
        discarded = reason
        state.withLock { $0 = loaded }
        // The bytes opening fetched are staged too, so that a full download does not fetch them again.
        if !remote.head.isEmpty, missing([0..<remote.head.count], gap: 0) == [0..<remote.head.count] {
            try append(0..<remote.head.count, remote.head)
        }
    }

    deinit { close(descriptor) }

    /// Removes the staging file (after a sync that replaced the local copy, or one whose bytes
    /// cannot be trusted).
    package func remove() { _ = FileSystem.unlink(path) }

    /// Ties the staged records to the version's tile index (`nil`: the object has none, a full
    /// download), Specs/updates.md §8 item 5: an earlier sync's records count only when they were
    /// bound to the same identity (or, for an object its ETag pins, to none yet); records of an
    /// object no ETag pins need the index, and without one a resume is refused, said in the
    /// returned note. Records of another identity are dropped (this sync's kept).
    package func bind(index: ContentIdentity?) throws(TileArchiveError) -> String? {
        let key = index?.description ?? "none"
        let (bound, earlier, earlierBytes) = state.withLock {
            ($0.bound, $0.runStart > $0.headerLength, $0.pendingBytes + $0.stagedBytes - $0.ownBytes)
        }
        if bound == key {
            state.withLock { state in
                state.ranges = (state.ranges + state.pending).sorted { $0.range.lowerBound < $1.range.lowerBound }
                state.stagedBytes += state.pendingBytes
                state.pending = []
                state.pendingBytes = 0
            }
            return nil
        }
        if etag == nil && index == nil {
            state.withLock {
                $0.pending = []
                $0.pendingBytes = 0
            }
            guard earlier else { return nil }
            return
                "\(remote.name) sends no ETag and has no tile index, so a resume cannot be bound to the object: the \(earlierBytes) bytes staged by an earlier sync were not used"
        }
        if bound == nil && etag != nil {
            try appendBinding(key)
            return nil
        }
        try restart(binding: key)
        guard earlier, earlierBytes > 0 else { return nil }
        return bound == nil
            ? "\(path) held \(earlierBytes) bytes of an object no ETag pins, not bound to an index: started again"
            : "\(path) held bytes of another version (index \(bound ?? "")): started again"
    }

    /// The bytes staged so far.
    package var stagedBytes: Int { state.withLock { $0.stagedBytes } }

    /// The part of `ranges` not staged yet, merged across gaps of at most `gap` bytes (a gap costs
    /// its bytes; a part of a multipart answer or a request costs its headers).
    package func missing(_ ranges: [Range<Int>], gap: Int) -> [Range<Int>] {
        var merged: [Range<Int>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) where !range.isEmpty {
            if let last = merged.last, range.lowerBound <= last.upperBound + gap,
                range.upperBound - last.lowerBound <= remote.options.maximumRequestBytes
            {
                merged[merged.count - 1] = last.lowerBound..<max(last.upperBound, range.upperBound)
            } else {
                merged.append(range)
            }
        }
        let staged = state.withLock { $0.ranges.map(\.range) }
        // Each merged range less the staged ranges that overlap it.
        return merged.flatMap { range -> [Range<Int>] in
            var pieces = [range]
            for s in staged where s.overlaps(range) {
                pieces = pieces.flatMap { piece -> [Range<Int>] in
                    guard piece.overlaps(s) else { return [piece] }
                    var rest: [Range<Int>] = []
                    if piece.lowerBound < s.lowerBound { rest.append(piece.lowerBound..<s.lowerBound) }
                    if s.upperBound < piece.upperBound { rest.append(s.upperBound..<piece.upperBound) }
                    return rest
                }
            }
            return pieces
        }
    }

    /// Fetches the parts of `ranges` not staged yet and appends them to the staging file (flushed
    /// to disk before this returns). `gap`: neighbours closer than this are fetched as one range.
    /// `progress` is told the bytes of the ranges to fetch first, then each range's as it is staged;
    /// what it throws stops the fetch (what was staged stays).
    package func stage(
        _ ranges: [Range<Int>], gap: Int, maximumRangesPerRequest: Int = 256,
        progress: ((_ total: Int, _ staged: Int) throws -> Void)? = nil
    ) throws {
        let wanted = missing(ranges, gap: gap)
        guard !wanted.isEmpty else { return }
        let total = wanted.reduce(0) { $0 + $1.count }
        var staged = 0
        try progress?(total, 0)
        try remote.fetch(ranges: wanted, maximumRangesPerRequest: maximumRangesPerRequest, observe: arrivals) { range, data in
            try appendMissing(range, data)
            staged += data.count
            try progress?(total, staged)
        }
        _ = fsync(descriptor)
    }

    func append(_ range: Range<Int>, _ data: Data) throws(TileArchiveError) {
        let bytes = [UInt8](data)
        let crc = bytes.withUnsafeBytes { CRC32.checksum($0) }
        let record = Self.le64(range.lowerBound) + Self.le32(bytes.count) + Self.le32(Int(crc)) + bytes
        // The place reserved first: the bytes of a request in flight are appended from the
        // transport's thread (``arrivals(_:)``).
        let at = state.withLock { state in
            defer { state.end += record.count }
            return state.end
        }
        try Self.write(descriptor, record, at: at, path: path)
        state.withLock { state in
            state.stagedBytes += bytes.count
            let index = state.ranges.firstIndex { $0.range.lowerBound > range.lowerBound } ?? state.ranges.count
            state.ranges.insert((range, at + 16), at: index)
        }
    }

    // MARK: ByteSource

    package func withBytes<R>(offset: Int, length: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try checkRange(offset: offset, length: length)
        let pieces = lookup(offset: offset, length: length)
        guard let pieces else {
            // Fetched (one request), staged, then read from the staging file like the rest.
            try stage([offset..<(offset + length)], gap: 0)
            guard lookup(offset: offset, length: length) != nil else {
                return try remote.withBytes(offset: offset, length: length, body)
            }
            return try withBytes(offset: offset, length: length, body)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(length)
        for piece in pieces { bytes += Self.pread(descriptor, offset: piece.at, length: piece.length) }
        guard bytes.count == length else {
            throw TileArchiveError(path: path, fault: .truncated("the staging file ends before the bytes it records"))
        }
        return try bytes.withUnsafeBytes(body)
    }

    /// Where the staged records hold the bytes, one piece a record; `nil` when they are not all staged.
    private func lookup(offset: Int, length: Int) -> [(at: Int, length: Int)]? {
        state.withLock { state -> [(at: Int, length: Int)]? in
            var low = 0, high = state.ranges.count
            while low < high {
                let middle = (low + high) / 2
                if state.ranges[middle].range.lowerBound <= offset { low = middle + 1 } else { high = middle }
            }
            var i = low - 1
            var position = offset
            var pieces: [(at: Int, length: Int)] = []
            while position < offset + length, i >= 0, i < state.ranges.count {
                let item = state.ranges[i]
                guard item.range.contains(position) else { return nil }
                let take = min(item.range.upperBound, offset + length) - position
                pieces.append((item.at + position - item.range.lowerBound, take))
                position += take
                i += 1
            }
            return position == offset + length ? pieces : nil
        }
    }

    package func willRead(_ ranges: [Range<Int>]) throws { try remote.willRead(ranges) }

    // MARK: Bytes

    /// `text` as a JSON string.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    static func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    static func le64(_ value: Int) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    static func get32(_ bytes: [UInt8], _ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * UInt32($1)) } }
    static func get64(_ bytes: [UInt8], _ at: Int) -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) } }

    static func pread(_ fd: Int32, offset: Int, length: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: length)
        var done = 0
        while done < length {
            let n = buffer.withUnsafeMutableBytes { Foundation.pread(fd, $0.baseAddress! + done, length - done, off_t(offset + done)) }
            if n <= 0 { break }
            done += n
        }
        return Array(buffer[0..<done])
    }

    static func write(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws(TileArchiveError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Foundation.pwrite(fd, $0.baseAddress! + done, bytes.count - done, off_t(offset + done)) }
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw TileArchiveError(
                    path: path, fault: .io(errno: code, reason: "cannot write the staging file: \(AtomicFile.describe(errno: code))"))
            }
            done += n
        }
    }
}

/// The tile hash index published beside a remote archive, fetched whole.
package enum RemoteTileIndex {
    package enum Answer: Sendable {
        /// The index's bytes, and whether the server answered the two ranges they were asked in
        /// with a multipart answer (`nil`: it merged them, so nothing was learnt).
        case index([UInt8], multipleRanges: Bool?)
        /// No index there: the status (404, 403, 410).
        case absent(status: Int)
    }

    /// GETs `url` (an archive's URL with `.tpindex` appended) as two ranges, `bytes=0-7,8-`: a
    /// server that answers several ranges sends both parts (multipart/byteranges), one that does
    /// not sends the whole index (200), so the index also tells, at no cost, how to ask for tiles.
    /// Its bytes, or `absent` for a 404, 403 or 410; any other status, an answer over `limit`
    /// bytes or a transport failure is an error naming the URL.
    package static func fetch(url: URL, limit: Int, client: HTTPClient = .shared, options: HTTPByteSource.Options = .init())
        throws(TileArchiveError) -> Answer
    {
        try fetch(url: url, limit: limit, client: client, options: options, authority: nil)
    }

    /// The index as the object `location` in S3, every request signed by `client` (a missing
    /// object: S3's 404, or 403 where the credentials may not list the bucket).
    package static func fetch(s3 location: S3Location, client: S3Client, limit: Int, options: HTTPByteSource.Options = .init())
        throws(TileArchiveError) -> Answer
    {
        try fetch(
            url: client.configuration.url(for: location), limit: limit, client: client.http, options: options,
            authority: S3RangeAuthority(client: client, location: location))
    }

    static func fetch(url: URL, limit: Int, client: HTTPClient, options: HTTPByteSource.Options, authority: (any RangeRequestAuthority)?)
        throws(TileArchiveError) -> Answer
    {
        let name = authority?.name ?? url.absoluteString
        var request = HTTPRequest(url: url, timeout: options.timeout, maximumBodyBytes: limit + 1024)
        request.setRanges("0-7,8-")
        let retry = options.retry
        let outcome = HTTPByteSource.send(request, client: client, retry: retry, authority: authority, attempts: Locked(1))
        let response: HTTPResponse
        switch outcome {
        case .failure(.refused(let reason)): throw TileArchiveError(path: name, fault: .cannotOpen(errno: 0, reason: reason))
        case .failure(.http(let error)):
            if case .tooLarge = error.fault {
                throw TileArchiveError(
                    path: name, fault: .corrupt("the index is larger than the \(limit) bytes an index of the archive's tiles can have"))
            }
            throw TileArchiveError(path: name, fault: .io(errno: 0, reason: error.reason))
        case .success(let value): response = value
        }
        if let encoded = response.encodedRangeFault { throw TileArchiveError(path: name, fault: .io(errno: 0, reason: encoded)) }
        switch response.status {
        case 200: return .index([UInt8](response.body), multipleRanges: false)
        case 206: break
        case 403, 404, 410: return .absent(status: response.status)
        default:
            throw TileArchiveError(
                path: name, fault: .cannotOpen(errno: 0, reason: authority?.explain(response) ?? "HTTP status \(response.status)"))
        }
        let contentType = response.contentType ?? ""
        if contentType.lowercased().hasPrefix("multipart/byteranges") {
            guard let boundary = HTTPByteSource.boundary(of: contentType) else {
                throw TileArchiveError(path: name, fault: .corrupt("a multipart/byteranges answer without a boundary (\(contentType))"))
            }
            let parts = try HTTPByteSource.parseMultipart(response.body, boundary: boundary, size: nil, name: name)
            var bytes: [UInt8] = []
            for part in parts.sorted(by: { $0.range.lowerBound < $1.range.lowerBound }) {
                guard part.range.lowerBound == bytes.count else {
                    throw TileArchiveError(path: name, fault: .corrupt("the multipart answer's parts leave a hole at byte \(bytes.count)"))
                }
                bytes += part.data
            }
            guard bytes.count <= limit else {
                throw TileArchiveError(
                    path: name, fault: .corrupt("the index is larger than the \(limit) bytes an index of the archive's tiles can have"))
            }
            return .index(bytes, multipleRanges: parts.count > 1 ? true : nil)
        }
        // One part: the two ranges merged (which says nothing), or the first alone (one range a request).
        guard let field = response.header("content-range"), let parsed = HTTPByteSource.parseContentRange(field),
            response.body.count == parsed.range.count
        else {
            throw TileArchiveError(
                path: name, fault: .corrupt("a 206 answer without a usable Content-Range (\(response.header("content-range") ?? "none"))"))
        }
        if parsed.range == 0..<parsed.size { return .index([UInt8](response.body), multipleRanges: nil) }
        guard parsed.range.lowerBound == 0 else {
            throw TileArchiveError(path: name, fault: .corrupt("asked for the index from byte 0, the server sent \(field)"))
        }
        // Only the first range: the rest in one more request.
        var rest = HTTPRequest(url: url, timeout: options.timeout, maximumBodyBytes: limit)
        rest.setRange(UInt64(parsed.range.upperBound)..<UInt64(parsed.size))
        let more = HTTPByteSource.send(rest, client: client, retry: retry, authority: authority, attempts: Locked(1))
        if case .success(let tail) = more, let encoded = tail.encodedRangeFault {
            throw TileArchiveError(path: name, fault: .io(errno: 0, reason: encoded))
        }
        guard case .success(let tail) = more, tail.status == 206, tail.body.count == parsed.size - parsed.range.upperBound else {
            throw TileArchiveError(path: name, fault: .corrupt("the rest of the index did not arrive whole"))
        }
        return .index([UInt8](response.body) + [UInt8](tail.body), multipleRanges: false)
    }
}
