import Foundation
import TilepackChecksum
import TilepackCore
import TilepackHTTP

extension S3Client {
    /// How a file goes up.
    public struct UploadOptions: Sendable {
        /// The bytes of a part (S3 takes 5 MiB at least, but for the last; 10,000 parts at most:
        /// larger files get larger parts).
        public var partSize = 8 << 20
        /// Parts in flight at once (memory: about this many parts), as `aws s3 cp`'s default
        /// (`max_concurrent_requests`, 10). Through the process's shared client each has a
        /// connection of its own (``S3Client/upload(file:to:options:)``).
        public var concurrency = 10
        /// Whether each part carries its CRC-32 (`x-amz-checksum-crc32`, the upload declared with
        /// `x-amz-checksum-algorithm: CRC32`), as the AWS tools send by default: the store checks
        /// every part, and keeps a checksum made of the parts' instead of reading the whole object
        /// again for one of its own (S3's CRC64NVME default; moto copies the object twice for it).
        /// Off for a store that refuses the fields (the command turns it off for
        /// `AWS_REQUEST_CHECKSUM_CALCULATION=when_required`, as the AWS tools do).
        public var partChecksums = true
        public init() {}
    }

    /// Puts the file at `path` at `location` by multipart upload in parallel parts, so the object
    /// appears whole or not at all: the upload is completed only when every part is up, and
    /// aborted when any fails. First, the stale multipart uploads of the same key (left by a
    /// killed process, which could not abort its own) are listed (ListMultipartUploads) and
    /// aborted. Returns the object's ETag.
    ///
    /// The parts go over a client of their own with a connection per part in flight when this
    /// client's is the process's shared one (``HTTPClient/shared``, which keeps 6 connections to a
    /// host for reads): a part beyond its transport's connections waits in the transport, and
    /// libcurl let such waiting parts starve while later ones took each connection freed (parts
    /// answered after 10-20 s among parts of 0.7 s, at 8 in flight over 6 connections). A client
    /// given to ``S3Client/init(configuration:http:retry:)`` carries the parts as it is.
    @discardableResult
    public func upload(file path: String, to location: S3Location, options: UploadOptions = UploadOptions()) async throws(S3Error)
        -> String?
    {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            throw S3Error(
                bucket: location.bucket, key: location.key, code: "LocalFile",
                message: "cannot read \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var info = stat()
        fstat(fd, &info)
        let size = Int(info.st_size)
        try await abortStaleUploads(of: location)
        let created = try await send(
            "POST", location, query: "uploads=", headers: options.partChecksums ? ["x-amz-checksum-algorithm": "CRC32"] : [:], body: Data())
        try check(created, location: location)
        guard let uploadId = S3XML(created.body).first("UploadId") else {
            throw S3Error(
                bucket: location.bucket, key: location.key, status: created.status, code: "InvalidResponse",
                message: "CreateMultipartUpload answered no UploadId")
        }
        do throws(S3Error) {
            let partSize = max(options.partSize, (size + 9999) / 10000, 5 << 20)
            let parts = max(1, (size + partSize - 1) / partSize)
            let concurrency = min(max(1, options.concurrency), parts)
            let partsHTTP =
                http === HTTPClient.shared ? HTTPClient(userAgent: http.userAgent, maximumConnectionsPerHost: concurrency) : http
            let etags = try await uploadParts(
                fd: fd, size: size, partSize: partSize, parts: parts, uploadId: uploadId, location: location,
                concurrency: concurrency, checksums: options.partChecksums, over: partsHTTP)
            var xml = "<CompleteMultipartUpload>"
            for (number, part) in etags.enumerated() {
                let checksum = part.crc32.map { "<ChecksumCRC32>\($0)</ChecksumCRC32>" } ?? ""
                xml += "<Part>\(checksum)<PartNumber>\(number + 1)</PartNumber><ETag>\(S3XML.escape(part.etag))</ETag></Part>"
            }
            xml += "</CompleteMultipartUpload>"
            let completed = try await send(
                "POST", location, query: S3Client.query([("uploadId", uploadId)]), headers: ["Content-Type": "application/xml"],
                body: Data(xml.utf8), timeout: .seconds(600))
            try check(completed, location: location)
            // S3 may answer 200 and report the failure in the body.
            let answer = S3XML(completed.body)
            if answer.first("Code") != nil, answer.first("ETag") == nil {
                throw S3Error.answer(
                    HTTPResponse(url: completed.url, status: 500, fields: completed.fields, body: completed.body), location: location,
                    region: configuration.region)
            }
            return answer.first("ETag")
        } catch {
            // Nothing half-written: the parts go away with the upload. The abort is tried three
            // times whatever the client's retry policy (its parts would stay stored, and billed);
            // one that still fails is left to the next upload of this key, and to the bucket's
            // lifecycle rule.
            for _ in 0..<3 {
                if (try? await abort(uploadId: uploadId, location: location)) != nil { break }
            }
            throw error
        }
    }

    /// Aborts every multipart upload of exactly `location`'s key; returns how many.
    @discardableResult
    public func abortStaleUploads(of location: S3Location) async throws(S3Error) -> Int {
        let bucket = S3Location(bucket: location.bucket, key: "")
        let response = try await send("GET", bucket, query: S3Client.query([("prefix", location.key), ("uploads", "")]))
        try check(response, location: location)
        var aborted = 0
        for upload in S3XML(response.body).blocks("Upload") where upload.first("Key") == location.key {
            guard let id = upload.first("UploadId") else { continue }
            try await abort(uploadId: id, location: location)
            aborted += 1
        }
        return aborted
    }

    func abort(uploadId: String, location: S3Location) async throws(S3Error) {
        let response = try await send("DELETE", location, query: S3Client.query([("uploadId", uploadId)]))
        try check(response, [200, 204, 404], location: location)
    }

    /// The parts, `concurrency` at a time over `partsHTTP`, read with `pread`; their ETags (and
    /// with `checksums` their CRC-32s, base64) in part order.
    private func uploadParts(
        fd: Int32, size: Int, partSize: Int, parts: Int, uploadId: String, location: S3Location, concurrency: Int, checksums: Bool,
        over partsHTTP: HTTPClient
    ) async throws(S3Error) -> [(etag: String, crc32: String?)] {
        typealias Part = (etag: String, crc32: String?)
        let outcome: Result<[Part], S3Error> = await withTaskGroup(of: Result<(Int, Part), S3Error>.self) { group in
            var etags = [Part](repeating: ("", nil), count: parts)
            var next = 0
            func add() {
                let number = next
                next += 1
                group.addTask {
                    do throws(S3Error) {
                        let offset = number * partSize
                        let length = min(partSize, size - offset)
                        guard let body = Self.readPart(fd: fd, offset: offset, length: length) else {
                            throw S3Error(
                                bucket: location.bucket, key: location.key, code: "LocalFile",
                                message: "the file changed while it was uploaded (part \(number + 1))")
                        }
                        let crc32 = checksums ? Self.base64CRC32(body) : nil
                        let response = try await self.send(
                            "PUT", location, query: S3Client.query([("partNumber", String(number + 1)), ("uploadId", uploadId)]),
                            headers: crc32.map { ["x-amz-checksum-crc32": $0] } ?? [:], body: body,
                            timeout: .seconds(600), maximumBodyBytes: 1 << 20, over: partsHTTP)
                        try self.check(response, location: location)
                        guard let etag = response.etag else {
                            throw S3Error(
                                bucket: location.bucket, key: location.key, status: response.status, code: "InvalidResponse",
                                message: "UploadPart \(number + 1) answered no ETag")
                        }
                        return .success((number, (etag, crc32)))
                    } catch { return .failure(error) }
                }
            }
            for _ in 0..<concurrency { add() }
            while let result = await group.next() {
                switch result {
                case .success(let (number, part)):
                    etags[number] = part
                    if next < parts { add() }
                case .failure(let error):
                    group.cancelAll()
                    return .failure(error)
                }
            }
            return .success(etags)
        }
        return try outcome.get()
    }

    /// The CRC-32 of `bytes`, big-endian, in base64: S3's `x-amz-checksum-crc32`.
    static func base64CRC32(_ bytes: Data) -> String {
        let crc = bytes.withUnsafeBytes { CRC32.checksum($0) }
        return Data([UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]).base64EncodedString()
    }

    /// `length` bytes of the file at `offset`, read into a buffer that is not zeroed first (the
    /// part's only copy before the transport's); `nil` when the file has fewer.
    static func readPart(fd: Int32, offset: Int, length: Int) -> Data? {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, length), alignment: 16)
        var done = 0
        while done < length {
            let read = pread(fd, buffer + done, length - done, off_t(offset + done))
            if read < 0, errno == EINTR { continue }
            guard read > 0 else {
                buffer.deallocate()
                return nil
            }
            done += read
        }
        return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in pointer.deallocate() })
    }

    /// Runs `body` to its end for a caller that blocks (the command's operations), on threads of
    /// TilepackRemote's own executor.
    package static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws(S3Error) -> T) throws(S3Error) -> T {
        try RemoteExecutor.shared.run(body).get()
    }
}
