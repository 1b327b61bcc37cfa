#if canImport(CryptoKit)
import CryptoKit
#else
internal import CTilepackCrypto
#endif

/// Ed25519 signatures (RFC 8032, pure): the signing keys of signed archives (Specs/signing.md §1).
///
/// One protocol, two implementations chosen at build time, as for CRC-32 and the digests: the
/// system's libcrypto on Linux (``LibcryptoEd25519``), CryptoKit on Apple platforms
/// (``CryptoKitEd25519``, kept to the framework calls). Keys are raw bytes: a 32-byte seed (RFC
/// 8032's private key) and a 32-byte public key; signatures are 64 bytes.
package protocol Ed25519Engine {
    /// The public key of `seed`; `nil` when `seed` is not 32 bytes.
    static func publicKey(seed: [UInt8]) -> [UInt8]?
    /// The signature of `message` by `seed`; `nil` when `seed` is not 32 bytes.
    static func sign(seed: [UInt8], message: [UInt8]) -> [UInt8]?
    /// Whether `signature` is `publicKey`'s signature of `message` (false for keys or signatures
    /// of the wrong length, and for a public key that is not a curve point).
    static func isValid(signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool
    /// 32 bytes from the system's cryptographically secure generator; `nil` when it has none.
    static func randomSeed() -> [UInt8]?
}

/// The platform's ``Ed25519Engine``.
#if canImport(CryptoKit)
package typealias Ed25519 = CryptoKitEd25519
#else
package typealias Ed25519 = LibcryptoEd25519
#endif

#if canImport(CryptoKit)
/// Ed25519 through CryptoKit's `Curve25519.Signing` (Apple platforms).
package enum CryptoKitEd25519: Ed25519Engine {
    package static func publicKey(seed: [UInt8]) -> [UInt8]? {
        (try? Curve25519.Signing.PrivateKey(rawRepresentation: seed)).map { Array($0.publicKey.rawRepresentation) }
    }

    package static func sign(seed: [UInt8], message: [UInt8]) -> [UInt8]? {
        guard let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: seed) else { return nil }
        return (try? key.signature(for: message)).map { Array($0) }
    }

    package static func isValid(signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    package static func randomSeed() -> [UInt8]? {
        Array(Curve25519.Signing.PrivateKey().rawRepresentation)
    }
}
#else
/// Ed25519 through libcrypto's `EVP_PKEY` one-shot `EVP_DigestSign`/`EVP_DigestVerify` (Linux).
package enum LibcryptoEd25519: Ed25519Engine {
    package static func publicKey(seed: [UInt8]) -> [UInt8]? {
        withKey(seed: seed) { key in
            var out = [UInt8](repeating: 0, count: 32)
            var length = 32
            return EVP_PKEY_get_raw_public_key(key, &out, &length) == 1 && length == 32 ? out : nil
        }
    }

    package static func sign(seed: [UInt8], message: [UInt8]) -> [UInt8]? {
        withKey(seed: seed) { key in
            guard let context = EVP_MD_CTX_new() else { return nil }
            defer { EVP_MD_CTX_free(context) }
            var signature = [UInt8](repeating: 0, count: 64)
            var length = 64
            guard EVP_DigestSignInit(context, nil, nil, nil, key) == 1,
                EVP_DigestSign(context, &signature, &length, message, message.count) == 1, length == 64
            else { return nil }
            return signature
        }
    }

    package static func isValid(signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, publicKey.count == 32,
            let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, 32)
        else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, 64, message, message.count) == 1
    }

    package static func randomSeed() -> [UInt8]? {
        var seed = [UInt8](repeating: 0, count: 32)
        return RAND_bytes(&seed, 32) == 1 ? seed : nil
    }

    /// Runs `body` with the `EVP_PKEY` of `seed`, freed afterwards; `nil` for a seed of another length.
    private static func withKey<T>(seed: [UInt8], _ body: (OpaquePointer) -> T?) -> T? {
        guard seed.count == 32, let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, 32) else { return nil }
        defer { EVP_PKEY_free(key) }
        return body(key)
    }
}
#endif
