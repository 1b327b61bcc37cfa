// The code of the article "Checking a side-loaded pack" (Sources/Tilepack/Tilepack.docc),
// compiled here and run by DocSampleTests. tools/check-docs.sh checks that the article shows the
// lines between the markers, unchanged.
// docs:begin
import Tilepack

/// The publisher's public key, as the app ships it: the one line of `tilepack keygen`'s NAME.pub.
let publisherKey = "maps.example.org/sample+c176ff64+AQq2z6vqzz5ZHmTNPeg+LLjrZTPH86gRlCySV70pqkdA"

/// Serves the pack a user side-loaded at `path` only if the publisher signed it, in release
/// `lowestRelease` or a later one; every tile is checked against the signed root on its first read.
func openSignedPack(path: String, lowestRelease: UInt64, key: String = publisherKey) throws -> ArchiveTileSource {
    let verifier = try VerifierKey(line: key, source: "the app's publisher key")

    // Opening reads path + ".tpsig" and checks it: the key's signature, the tree's hashes, the
    // release, the tile count and the metadata. A pack that fails throws SignatureError, naming why.
    let source = try ArchiveTileSource(path: path, key: verifier, minimumRelease: lowestRelease) { failure in
        // A tile whose bytes are not the publisher's is never drawn; it is reported once here.
        print("refused: \(failure)")
    }
    if let signed = source.archive as? VerifiedTileArchive {
        print("release \(signed.root.release) of \(signed.root.origin), signed \(signed.root.time)")
    }
    return source
}
// docs:end
