import Foundation
internal import TilepackChecksum

/// A public key that verifies signed archives (Specs/signing.md §1): a name, its key id and an
/// Ed25519 public key, written as one line a user pastes, `name+keyid+base64(0x01 || key)` (C2SP
/// signed-note's verifier key, as Go's `sumdb/note` defines it).
public struct VerifierKey: Sendable, Hashable, CustomStringConvertible {
    /// The key's name (no white space, no `+`).
    public let name: String
    /// The 32-byte Ed25519 public key.
    public let publicKey: [UInt8]
    /// The first 4 bytes of SHA-256(name || 0x0A || 0x01 || publicKey), big-endian.
    public let keyID: UInt32

    /// The key `publicKey` under `name`; `nil` for an invalid name or a key not 32 bytes long.
    public init?(name: String, publicKey: [UInt8]) {
        guard KeyLine.isValidName(name), publicKey.count == 32 else { return nil }
        self.name = name
        self.publicKey = publicKey
        self.keyID = KeyLine.keyID(name: name, publicKey: publicKey)
    }

    /// Reads the one line of a public key (surrounding white space ignored); `source` names it in errors.
    public init(line: String, source: String) throws(SignatureError) {
        let (name, id, key) = try KeyLine.parse(line.trimmingCharacters(in: .whitespacesAndNewlines), private: false, source: source)
        let publicKeyBytes = key
        guard let made = VerifierKey(name: name, publicKey: publicKeyBytes), made.keyID == id else {
            throw .keyFile(path: source, reason: "its key id \(KeyLine.hex(id)) is not the id of its name and key (a damaged or edited key)")
        }
        self = made
    }

    /// Reads a public key file (`NAME.pub`).
    public init(contentsOf path: String) throws(SignatureError) {
        try self.init(line: try KeyLine.read(path), source: path)
    }

    /// `name+keyid`, how messages name the key.
    public var description: String { "\(name)+\(KeyLine.hex(keyID))" }

    /// The line of its file (with its newline).
    public var line: String { "\(name)+\(KeyLine.hex(keyID))+\(Data([0x01] + publicKey).base64EncodedString())\n" }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    package func isValid(signature: [UInt8], of message: [UInt8]) -> Bool {
        Ed25519.isValid(signature: signature, of: message, publicKey: publicKey)
    }
}

/// A private key that signs archives (Specs/signing.md §1): its file is the one line
/// `PRIVATE+KEY+name+keyid+base64(0x01 || seed)`, mode 0600.
public struct SigningKey: Sendable {
    /// The key's name.
    public var name: String { verifier.name }
    /// Its public half.
    public let verifier: VerifierKey
    let seed: [UInt8]

    /// The key of `seed` (32 bytes) under `name`; `nil` for an invalid name or seed.
    public init?(name: String, seed: [UInt8]) {
        guard let publicKey = Ed25519.publicKey(seed: seed), let verifier = VerifierKey(name: name, publicKey: publicKey) else {
            return nil
        }
        self.verifier = verifier
        self.seed = seed
    }

    /// A new key from the system's cryptographically secure generator.
    public static func generate(name: String) throws(SignatureError) -> SigningKey {
        guard KeyLine.isValidName(name) else {
            throw .cannotSign(path: name, reason: "a key name must be 1 to \(KeyLine.maximumNameLength) bytes without spaces or '+'")
        }
        guard let seed = Ed25519.randomSeed(), let key = SigningKey(name: name, seed: seed) else {
            throw .cannotSign(path: name, reason: "the system's random generator gave no key")
        }
        return key
    }

    /// Reads a private key file (`NAME.key`).
    public init(contentsOf path: String) throws(SignatureError) {
        let (name, id, seed) = try KeyLine.parse(
            try KeyLine.read(path).trimmingCharacters(in: .whitespacesAndNewlines), private: true, source: path)
        guard let key = SigningKey(name: name, seed: seed), key.verifier.keyID == id else {
            throw .keyFile(path: path, reason: "its key id \(KeyLine.hex(id)) is not the id of its name and key (a damaged or edited key)")
        }
        self = key
    }

    /// The line of its file (with its newline).
    public var line: String {
        "PRIVATE+KEY+\(name)+\(KeyLine.hex(verifier.keyID))+\(Data([0x01] + seed).base64EncodedString())\n"
    }

    /// The Ed25519 signature of `message`.
    package func sign(_ message: [UInt8]) -> [UInt8] {
        // A 32-byte seed always signs (checked at init); libcrypto fails only without memory.
        guard let signature = Ed25519.sign(seed: seed, message: message) else { fatalError("Ed25519 signing failed (out of memory)") }
        return signature
    }

    /// Writes the private key to `path` (mode 0600, created, never replacing a file unless `overwrite`)
    /// and the public key to `publicPath` (mode 0644), each beside its destination and renamed into place.
    public func write(privateKeyTo path: String, publicKeyTo publicPath: String, overwrite: Bool) throws {
        for (destination, text, mode) in [(path, line, mode_t(0o600)), (publicPath, verifier.line, mode_t(0o644))] {
            let file = try AtomicFile(destination: destination, overwrite: overwrite)
            guard chmod(file.temporaryPath, mode) == 0 else {
                throw SignatureError.keyFile(path: destination, reason: "cannot set its mode: \(String(cString: strerror(errno)))")
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: file.temporaryPath))
            try file.commit()
        }
    }
}

/// The key line grammar of C2SP signed-note, shared by both key types.
enum KeyLine {
    static let maximumNameLength = 128

    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maximumNameLength && !name.contains("+")
            && !name.unicodeScalars.contains { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7f }
    }

    static func keyID(name: String, publicKey: [UInt8]) -> UInt32 {
        let digest = Digest.hash(.sha256, Array(name.utf8) + [0x0A, 0x01] + publicKey)
        return digest.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func hex(_ id: UInt32) -> String {
        let digits = String(id, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// A key file's text, bounded (a key line is under 300 bytes).
    static func read(_ path: String) throws(SignatureError) -> String {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw .keyFile(path: path, reason: "cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: 4096)) ?? Data()
        guard data.count < 4096 else { throw .keyFile(path: path, reason: "is over 4 KiB: not a key file") }
        guard let text = String(data: data, encoding: .utf8) else { throw .keyFile(path: path, reason: "is not UTF-8 text: not a key file") }
        return text
    }

    /// `[PRIVATE+KEY+]name+keyid+base64(0x01 || 32 bytes)`: the name, the id and the 32 bytes.
    static func parse(_ line: String, private isPrivate: Bool, source: String) throws(SignatureError) -> (String, UInt32, [UInt8]) {
        var text = Substring(line)
        let privatePrefix = "PRIVATE+KEY+"
        if text.hasPrefix(privatePrefix) != isPrivate {
            throw .keyFile(
                path: source,
                reason: isPrivate
                    ? "is not a private key (a private key line starts with PRIVATE+KEY+; this may be the public key)"
                    : "is a private key, not a public key: give the NAME.pub file (and keep the private key secret)")
        }
        if isPrivate { text = text.dropFirst(privatePrefix.count) }
        // The name holds no '+' and the id is hex: the base64 key after the second '+' may hold some.
        let parts = text.split(separator: "+", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !text.contains("\n") else {
            throw .keyFile(path: source, reason: "is not a key line (name+keyid+base64 key, Specs/signing.md §1)")
        }
        let name = String(parts[0])
        guard isValidName(name) else { throw .keyFile(path: source, reason: "its key name \"\(name)\" is empty, too long or holds a space") }
        guard parts[1].count == 8, parts[1].allSatisfy(\.isHexDigit), parts[1] == parts[1].lowercased(), let id = UInt32(parts[1], radix: 16) else {
            throw .keyFile(path: source, reason: "its key id \"\(parts[1])\" is not 8 lower-case hex digits")
        }
        guard let data = Data(base64Encoded: String(parts[2])), data.base64EncodedString() == parts[2] else {
            throw .keyFile(path: source, reason: "its key is not canonical base64")
        }
        let bytes = [UInt8](data)
        guard bytes.count == 33, bytes[0] == 0x01 else {
            throw .keyFile(path: source, reason: "its key is not an Ed25519 key (type byte 01 and 32 bytes; it has \(bytes.count) bytes)")
        }
        return (name, id, Array(bytes.dropFirst()))
    }
}
