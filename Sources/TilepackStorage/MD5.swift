#if canImport(CryptoKit)
import CryptoKit
#else
internal import CTilepackCrypto
#endif

/// MD5, for MBTiles' `agg_tiles_hash` and `tile_id`s (content addresses, not security).
///
/// It comes from the platform: CryptoKit on Apple platforms, the system's libcrypto (OpenSSL's
/// EVP interface, Debian's libssl-dev) on Linux, so that tilepack compiles no TLS stack of its
/// own. On Linux the instance owns the `EVP_MD_CTX` and frees it when it goes away.
final class MD5: @unchecked Sendable {
    /// The length of a digest in bytes.
    static let digestLength = 16

    #if canImport(CryptoKit)
    private var hasher = Insecure.MD5()
    #else
    private let context: OpaquePointer
    #endif

    init() {
        #if !canImport(CryptoKit)
        // Allocation fails only when memory is exhausted; MD5 is always available in OpenSSL's
        // default provider, which Debian does not disable.
        guard let context = EVP_MD_CTX_new(), EVP_DigestInit_ex(context, EVP_md5(), nil) == 1 else {
            fatalError("libcrypto could not set up an MD5 context (out of memory)")
        }
        self.context = context
        #endif
    }

    #if !canImport(CryptoKit)
    deinit { EVP_MD_CTX_free(context) }
    #endif

    /// Adds bytes to the hash.
    func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        #if canImport(CryptoKit)
        hasher.update(bufferPointer: bytes)
        #else
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
        #endif
    }

    /// The digest of everything added; the hasher must not be used afterwards.
    func finalize() -> [UInt8] {
        #if canImport(CryptoKit)
        return Array(hasher.finalize())
        #else
        var digest = [UInt8](repeating: 0, count: Self.digestLength)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest
        #endif
    }

    /// The digest of `bytes`.
    static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let md5 = MD5()
        md5.update(bytes)
        return md5.finalize()
    }
}
