import Foundation
import TilepackCore
import TilepackHTTP
import TilepackStorage

extension HTTPByteSource {
    /// Whether the server answered several ranges in one request (`multipart/byteranges`):
    /// `nil` until ``fetch(ranges:maximumRangesPerRequest:_:)`` asked.
    package var answersMultipleRanges: Bool? { state.withLock { $0.multipleRanges } }

    /// Sets what the server is known to do with several ranges (learnt from another request to it).
    package func assumeMultipleRanges(_ answers: Bool) { state.withLock { $0.multipleRanges = answers } }

    /// The body bytes received by range requests, the first (which opening makes) included.
    package var receivedBytes: Int { state.withLock { $0.receivedBytes } }

    /// Fetches `ranges` (ascending, disjoint) and hands each to `body` with its bytes, in order, as
    /// it arrives: several in one request (`Range: bytes=a-b,c-d,...`, a `multipart/byteranges`
    /// answer) while the server answers them, one range a request once it does not (it ignored the
    /// ranges: status 200; or answered only the first). Every answer is checked as a single range's
    /// is: the object's ETag or Last-Modified and size, each part's `Content-Range` and length.
    /// The cache is not used or filled. `observe` gives a one-range request an observer of its
    /// body's bytes as they arrive (``HTTPRequest/bodyObserver``).
    package func fetch(
        ranges: [Range<Int>], maximumRangesPerRequest: Int = 256, observe: ((Range<Int>) -> HTTPBodyObserver)? = nil,
        _ body: (Range<Int>, Data) throws -> Void
    ) throws {
        var i = 0
        while i < ranges.count {
            let multiple = state.withLock { $0.multipleRanges } ?? true
            if !multiple || ranges.count - i == 1 {
                let data = try fetchUncached(ranges[i], observer: observe?(ranges[i]))
                try body(ranges[i], data)
                i += 1
                continue
            }
            var batch: [Range<Int>] = []
            var bytes = 0
            var headerLength = 0
            while i + batch.count < ranges.count, batch.count < maximumRangesPerRequest {
                let next = ranges[i + batch.count]
                // nginx reads a request header of at most 8 KiB (large_client_header_buffers).
                let text = "\(next.lowerBound)-\(next.upperBound - 1),".utf8.count
                if !batch.isEmpty && (bytes + next.count > options.maximumRequestBytes || headerLength + text > 6000) { break }
                batch.append(next)
                bytes += next.count
                headerLength += text
            }
            guard let parts = try fetchMultiple(batch) else {
                state.withLock { $0.multipleRanges = false }
                continue
            }
            state.withLock { $0.multipleRanges = true }
            for (range, data) in zip(batch, parts) { try body(range, data) }
            i += batch.count
        }
    }

    /// One range by one request, checked, not cached.
    private func fetchUncached(_ range: Range<Int>, observer: HTTPBodyObserver?) throws(TileArchiveError) -> Data {
        let result = try Self.fetch(
            url: url, range: range, etag: etag, client: client, options: options, expectedSize: count,
            lastModified: lastModified, authority: authority, observer: observer)
        state.withLock { state in
            state.requests += result.attempts
            state.receivedBytes += result.body.count
        }
        return result.body
    }

    /// One request for several ranges; `nil` when the server did not answer them together.
    private func fetchMultiple(_ ranges: [Range<Int>]) throws(TileArchiveError) -> [Data]? {
        func fail(_ fault: TileArchiveError.Fault) -> TileArchiveError { TileArchiveError(path: name, fault: fault) }
        let total = ranges.reduce(0) { $0 + $1.count }
        // Room for each part's boundary and headers; the whole object (status 200) is refused.
        var request = HTTPRequest(url: url, timeout: options.timeout, maximumBodyBytes: total + 256 * ranges.count + 1024)
        request.setRanges(ranges.map { "\($0.lowerBound)-\($0.upperBound - 1)" }.joined(separator: ","))
        Self.pin(&request, etag: etag, lastModified: lastModified)
        let attempts = Locked(1)
        let outcome = Self.send(request, client: client, retry: options.retry, authority: authority, attempts: attempts)
        let response: HTTPResponse
        switch outcome {
        case .success(let value): response = value
        case .failure(.refused(let reason)): throw fail(.cannotOpen(errno: 0, reason: reason))
        case .failure(.http(let error)):
            if case .tooLarge = error.fault {
                state.withLock { $0.requests += attempts.withLock { $0 } }
                return nil
            }
            throw fail(.io(errno: 0, reason: error.reason))
        }
        state.withLock { state in
            state.requests += attempts.withLock { $0 }
            state.receivedBytes += response.body.count
        }
        if let change = Self.versionChange(response, etag: etag, lastModified: lastModified) { throw fail(.corrupt(change)) }
        if let encoded = response.encodedRangeFault { throw fail(.io(errno: 0, reason: encoded)) }
        switch response.status {
        case 206: break
        case 200:
            // The ranges ignored: the whole object, when it was small enough to arrive.
            guard response.body.count == count else { return nil }
            return ranges.map { response.body.subdata(in: $0) }
        default:
            throw Self.refusal(response, name: name, etag: etag, lastModified: lastModified, authority: authority)
        }
        let contentType = response.contentType ?? ""
        var parts: [(range: Range<Int>, data: Data)]
        if contentType.lowercased().hasPrefix("multipart/byteranges") {
            guard let boundary = Self.boundary(of: contentType) else {
                throw fail(.corrupt("a multipart/byteranges answer without a boundary (\(contentType))"))
            }
            parts = try Self.parseMultipart(response.body, boundary: boundary, size: count, name: name).map { ($0.range, $0.data) }
        } else {
            // One part: the server may answer only the first range, or merge them all into one.
            guard let contentRange = response.header("content-range"), let parsed = Self.parseContentRange(contentRange),
                parsed.size == count, response.body.count == parsed.range.count
            else {
                throw fail(
                    .corrupt(
                        "a 206 answer to \(ranges.count) ranges without multipart/byteranges or a usable Content-Range (\(response.header("content-range") ?? "none"), \(response.body.count) bytes)"
                    ))
            }
            if !(parsed.range.lowerBound <= ranges[0].lowerBound && parsed.range.upperBound >= ranges[ranges.count - 1].upperBound) {
                // Only some of the ranges: the server answers one range a request.
                return nil
            }
            parts = [(parsed.range, response.body)]
        }
        var result: [Data] = []
        result.reserveCapacity(ranges.count)
        for range in ranges {
            guard let part = parts.first(where: { $0.range.lowerBound <= range.lowerBound && $0.range.upperBound >= range.upperBound })
            else {
                throw fail(
                    .corrupt("asked for bytes \(range.lowerBound)-\(range.upperBound - 1), the server's multipart answer lacks them"))
            }
            let start = range.lowerBound - part.range.lowerBound
            result.append(part.data.subdata(in: start..<(start + range.count)))
        }
        return result
    }

    /// The `boundary` parameter of a `multipart/byteranges` content type.
    static func boundary(of contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "boundary" else { continue }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            return value.isEmpty || value.utf8.count > 70 ? nil : value
        }
        return nil
    }

    /// The parts of a `multipart/byteranges` body (RFC 9110 §14.6): each part's bytes are as long
    /// as its `Content-Range` says, so a boundary inside the data is never mistaken for one.
    static func parseMultipart(_ body: Data, boundary: String, size: Int?, name: String) throws(TileArchiveError) -> [(
        range: Range<Int>, data: Data, size: Int
    )] {
        func fail(_ text: String) -> TileArchiveError {
            TileArchiveError(path: name, fault: .corrupt("a multipart/byteranges answer: \(text)"))
        }
        let bytes = [UInt8](body)
        let delimiter = Array("--\(boundary)".utf8)
        func starts(_ pattern: [UInt8], at index: Int) -> Bool {
            index + pattern.count <= bytes.count && bytes[index..<(index + pattern.count)].elementsEqual(pattern)
        }
        // The preamble (usually a CRLF) ends at the first delimiter.
        var p = 0
        while p < bytes.count, !starts(delimiter, at: p) {
            p += 1
            if p > 1024 { throw fail("no boundary in its first 1 KiB") }
        }
        var parts: [(range: Range<Int>, data: Data, size: Int)] = []
        while true {
            guard starts(delimiter, at: p) else { throw fail("a part does not end with its boundary at byte \(p)") }
            p += delimiter.count
            if starts(Array("--".utf8), at: p) { break }
            guard starts([13, 10], at: p) else { throw fail("a boundary is not followed by CRLF at byte \(p)") }
            p += 2
            // Header fields up to an empty line.
            var contentRange: String?
            while true {
                guard let end = (p..<min(bytes.count, p + 8192)).first(where: { starts([13, 10], at: $0) }) else {
                    throw fail("a part's headers do not end (truncated)")
                }
                let line = String(decoding: bytes[p..<end], as: UTF8.self)
                p = end + 2
                if line.isEmpty { break }
                let pair = line.split(separator: ":", maxSplits: 1)
                if pair.count == 2, pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "content-range" {
                    contentRange = pair[1].trimmingCharacters(in: .whitespaces)
                }
            }
            guard let contentRange, let parsed = parseContentRange(contentRange) else {
                throw fail("a part without a usable Content-Range")
            }
            let expected = size ?? parts.first?.size ?? parsed.size
            guard parsed.size == expected else { throw fail("a part of an object of \(parsed.size) bytes, not \(expected)") }
            guard parsed.range.count <= bytes.count - p else {
                throw fail("the part for bytes \(parsed.range.lowerBound)-\(parsed.range.upperBound - 1) is truncated")
            }
            parts.append((parsed.range, Data(bytes[p..<(p + parsed.range.count)]), parsed.size))
            p += parsed.range.count
            guard starts([13, 10], at: p) else { throw fail("a part's data is not followed by CRLF at byte \(p)") }
            p += 2
        }
        return parts
    }
}
