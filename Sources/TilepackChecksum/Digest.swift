#if canImport(CryptoKit)
import CryptoKit
#else
internal import CTilepackCrypto
#endif

/// The hash functions tilepack computes with (content addresses and request signatures, not
/// passwords), in one place: MD5 for MBTiles' `agg_tiles_hash` and `tile_id`s, SHA-256 for content
/// identities and request signing, HMAC-SHA-256 over it.
///
/// They come from the platform: CryptoKit on Apple platforms, the system's libcrypto (OpenSSL's
/// EVP interface, Debian's libssl-dev) on Linux, so that tilepack compiles no hash or TLS stack of
/// its own. On Linux an instance owns its `EVP_MD_CTX` and frees it when it goes away.
package final class Digest: @unchecked Sendable {
    /// The functions a ``Digest`` computes.
    package enum Algorithm: Sendable {
        case md5, sha256

        /// The length of a digest in bytes.
        package var digestLength: Int {
            switch self {
            case .md5: 16
            case .sha256: 32
            }
        }
    }

    /// The function this instance computes.
    package let algorithm: Algorithm

    #if canImport(CryptoKit)
    private enum Hasher {
        case md5(Insecure.MD5)
        case sha256(SHA256)
    }
    private var hasher: Hasher
    #else
    private let context: OpaquePointer
    #endif

    package init(_ algorithm: Algorithm) {
        self.algorithm = algorithm
        #if canImport(CryptoKit)
        switch algorithm {
        case .md5: hasher = .md5(Insecure.MD5())
        case .sha256: hasher = .sha256(SHA256())
        }
        #else
        // Allocation fails only when memory is exhausted; MD5 and SHA-256 are always available in
        // OpenSSL's default provider, which Debian does not disable.
        let md = algorithm == .md5 ? EVP_md5() : EVP_sha256()
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, md, nil) == 1 else {
            fatalError("libcrypto could not set up a digest context (out of memory)")
        }
        self.context = context
        #endif
    }

    #if !canImport(CryptoKit)
    deinit { EVP_MD_CTX_free(context) }
    #endif

    /// Adds bytes to the hash.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        #if canImport(CryptoKit)
        switch hasher {
        case .md5(var h):
            h.update(bufferPointer: bytes)
            hasher = .md5(h)
        case .sha256(var h):
            h.update(bufferPointer: bytes)
            hasher = .sha256(h)
        }
        #else
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
        #endif
    }

    /// Adds the bytes of `bytes`.
    package func update(_ bytes: some Sequence<UInt8>) {
        var array = Array(bytes)
        array.withUnsafeMutableBytes { update(UnsafeRawBufferPointer($0)) }
    }

    /// The digest of everything added; the hasher must not be used afterwards.
    package func finalize() -> [UInt8] {
        #if canImport(CryptoKit)
        switch hasher {
        case .md5(let h): return Array(h.finalize())
        case .sha256(let h): return Array(h.finalize())
        }
        #else
        var digest = [UInt8](repeating: 0, count: algorithm.digestLength)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest
        #endif
    }

    /// Starts a new hash in this instance, as a new instance would, without allocating a context
    /// or looking the algorithm up again (which libcrypto's `EVP_DigestInit_ex` with an algorithm
    /// does each time): for many short hashes in a row, e.g. one per tile.
    package func reset() {
        #if canImport(CryptoKit)
        switch algorithm {
        case .md5: hasher = .md5(Insecure.MD5())
        case .sha256: hasher = .sha256(SHA256())
        }
        #else
        // No algorithm given: the context's own is started again.
        guard EVP_DigestInit_ex(context, nil, nil) == 1 else {
            fatalError("libcrypto could not start a digest again (out of memory)")
        }
        #endif
    }

    /// The digest of `bytes`.
    package static func hash(_ algorithm: Algorithm, _ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let digest = Digest(algorithm)
        digest.update(bytes)
        return digest.finalize()
    }

    /// The digest of `bytes`.
    package static func hash(_ algorithm: Algorithm, _ bytes: some Sequence<UInt8>) -> [UInt8] {
        let digest = Digest(algorithm)
        digest.update(bytes)
        return digest.finalize()
    }

    /// SHA-256 of `first` then `second` (the empty default) into the 32 bytes at `out`, with no
    /// context object: for many short inputs in a row (a signed archive's leaves and nodes, each
    /// tile's hash), where a ``Digest``'s per-call costs (libcrypto's EVP dispatch, the array a
    /// ``finalize()`` returns) would cost more than the hashing. On Linux SHA-256's own libcrypto
    /// functions on a context on the stack; CryptoKit's `SHA256` on Apple platforms.
    package static func sha256(
        _ first: UnsafeRawBufferPointer, _ second: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        into out: UnsafeMutableRawPointer
    ) {
        #if canImport(CryptoKit)
        var hasher = SHA256()
        hasher.update(bufferPointer: first)
        if second.count > 0 { hasher.update(bufferPointer: second) }
        hasher.finalize().withUnsafeBytes { out.copyMemory(from: $0.baseAddress!, byteCount: 32) }
        #else
        var context = SHA256_CTX()
        SHA256_Init(&context)
        SHA256_Update(&context, first.baseAddress, first.count)
        if second.count > 0 { SHA256_Update(&context, second.baseAddress, second.count) }
        SHA256_Final(out.assumingMemoryBound(to: UInt8.self), &context)
        #endif
    }

    /// HMAC-SHA-256 (RFC 2104) of `message` under `key`, over this type's SHA-256: what AWS
    /// Signature Version 4 chains.
    package static func hmacSHA256(key: some Sequence<UInt8>, message: some Sequence<UInt8>) -> [UInt8] {
        let blockSize = 64
        var key = Array(key)
        if key.count > blockSize { key = hash(.sha256, key) }
        key += [UInt8](repeating: 0, count: blockSize - key.count)
        let inner = Digest(.sha256)
        inner.update(key.map { $0 ^ 0x36 })
        inner.update(message)
        let outer = Digest(.sha256)
        outer.update(key.map { $0 ^ 0x5c })
        outer.update(inner.finalize())
        return outer.finalize()
    }

    /// `bytes` in lower-case hexadecimal.
    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
