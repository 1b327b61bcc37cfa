import Foundation

/// The signed root of an archive's tree (Specs/signing.md §4): the body of a C2SP signed note,
/// seven lines, and its signatures.
public struct SignedRoot: Sendable, Equatable {
    /// The dataset: the series of releases one publisher makes of one map.
    public var origin: String
    /// The number of leaves (tiles).
    public var treeSize: UInt64
    /// The tree's root hash (32 bytes).
    public var rootHash: [UInt8]
    /// The archive's content identity (Specs/updates.md §1).
    public var identity: ContentIdentity
    /// The release number the publisher gave.
    public var release: UInt64
    /// When it was signed, UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    public var time: String

    /// The body's fourth line: the order, leaf and node of Specs/signing.md §2-3.
    public static let treeLine = "tree tilepack-v1"
    /// The most bytes a signed note may have.
    public static let maximumNoteLength = 4096
    /// The most signature lines a note may have.
    public static let maximumSignatures = 16

    public init(origin: String, treeSize: UInt64, rootHash: [UInt8], identity: ContentIdentity, release: UInt64, time: String) {
        self.origin = origin
        self.treeSize = treeSize
        self.rootHash = rootHash
        self.identity = identity
        self.release = release
        self.time = time
    }

    /// `seconds` since 1970 as `YYYY-MM-DDTHH:MM:SSZ`.
    public static func time(seconds: Int64) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }

    /// The signed text: seven lines, each ending in `\n`.
    public var body: String {
        [
            origin, String(treeSize), Data(rootHash).base64EncodedString(), Self.treeLine, "identity \(identity)", "release \(release)",
            "time \(time)",
        ].map { $0 + "\n" }.joined()
    }

    /// The signed note: the body, an empty line and `key`'s signature line.
    public func signed(by key: SigningKey) -> String {
        let body = Array(self.body.utf8)
        let signature = key.sign(body)
        let id = withUnsafeBytes(of: key.verifier.keyID.bigEndian) { Array($0) }
        return self.body + "\n" + "\u{2014} \(key.name) \(Data(id + signature).base64EncodedString())\n"
    }

    /// Reads a signed note and checks `key`'s signature of it before reading its body; `source`
    /// (the sidecar's path or URL) names it in errors.
    public static func open(_ note: [UInt8], key: VerifierKey, source: String) throws(SignatureError) -> SignedRoot {
        func fail(_ reason: String) -> SignatureError { .sidecar(path: source, reason: "its signed root is malformed: \(reason)") }
        guard note.count <= maximumNoteLength else { throw fail("over \(maximumNoteLength) bytes") }
        guard let text = String(validating: note, as: UTF8.self) else { throw fail("not UTF-8") }
        guard let split = text.range(of: "\n\n", options: .backwards) else { throw fail("no empty line before its signatures") }
        let body = String(text[..<split.lowerBound]) + "\n"
        let signatureLines = text[split.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
        guard signatureLines.last == "", signatureLines.count - 1 <= maximumSignatures else {
            throw fail("its signature lines do not end in a newline, or there are over \(maximumSignatures)")
        }
        var signers: [String] = []
        var verified = false
        for line in signatureLines.dropLast() {
            let (name, id, signature) = try signatureLine(line, fail: fail)
            signers.append("\(name)+\(KeyLine.hex(id))")
            guard name == key.name, id == key.keyID else { continue }
            guard signature.count == 64, key.isValid(signature: signature, of: Array(body.utf8)) else {
                throw .badSignature(key: key.description, path: source)
            }
            verified = true
            break
        }
        guard verified else { throw .notSignedBy(key: key.description, path: source, signers: signers) }
        return try parseBody(body, fail: fail)
    }

    /// `— name base64(keyid || signature)`.
    private static func signatureLine(
        _ line: Substring, fail: (String) -> SignatureError
    ) throws(SignatureError) -> (String, UInt32, [UInt8]) {
        guard line.hasPrefix("\u{2014} ") else { throw fail("a signature line does not start with an em dash and a space") }
        let fields = line.dropFirst(2).split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 2, let data = Data(base64Encoded: String(fields[1])), data.count > 4 else {
            throw fail("a signature line is not \"— NAME BASE64\"")
        }
        let bytes = [UInt8](data)
        return (String(fields[0]), bytes.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }, Array(bytes.dropFirst(4)))
    }

    /// The seven lines of a body whose signature was checked.
    private static func parseBody(_ body: String, fail: (String) -> SignatureError) throws(SignatureError) -> SignedRoot {
        let lines = body.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        guard lines.count == 7 else { throw fail("its body has \(lines.count) lines, not 7 (Specs/signing.md §4)") }
        let l = Array(lines)
        func value(_ index: Int, _ key: String) throws(SignatureError) -> Substring {
            guard l[index].hasPrefix(key + " ") else { throw fail("line \(index + 1) is not \"\(key) ...\"") }
            return l[index].dropFirst(key.count + 1)
        }
        guard !l[0].isEmpty else { throw fail("its origin is empty") }
        guard let size = UInt64(l[1]), String(size) == l[1] else { throw fail("its tree size \"\(l[1])\" is not a decimal number") }
        guard let root = Data(base64Encoded: String(l[2])), root.count == 32 else { throw fail("its root hash is not 32 bytes of base64") }
        guard l[3] == treeLine else { throw fail("its tree line is \"\(l[3])\", not \"\(treeLine)\" (another tree definition)") }
        guard let identity = ContentIdentity(String(try value(4, "identity"))) else { throw fail("its identity is not a tpid1 identity") }
        let releaseText = try value(5, "release")
        guard let release = UInt64(releaseText), String(release) == releaseText else { throw fail("its release is not a decimal number") }
        let time = String(try value(6, "time"))
        guard time.count == 20, time.hasSuffix("Z") else { throw fail("its time \"\(time)\" is not YYYY-MM-DDTHH:MM:SSZ") }
        return SignedRoot(
            origin: String(l[0]), treeSize: size, rootHash: [UInt8](root), identity: identity, release: release, time: time)
    }
}
