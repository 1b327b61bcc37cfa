import TilepackCore
import TilepackStorage

extension ArchiveVerifier {
    /// A stored content identity (`tilepack_content_identity`, kept by a patch applied in place)
    /// checked against the tiles and metadata: one more pass over the tiles, only when one is stored.
    static func verifyStoredIdentity(path: String, opened: (any TileArchive)?, collector: inout Collector) {
        guard let archive = opened ?? (try? openTileArchive(path: path, bundleAccess: .positionalReads)),
            let stored = (try? archive.metadata())?[ContentIdentity.metadataKey]
        else { return }
        guard let declared = ContentIdentity(stored) else {
            collector.add(
                VerifyFinding(.error, "identity", "'\(stored)' is not a content identity (tpid1:...)", key: ContentIdentity.metadataKey))
            return
        }
        do {
            let computed = try ContentIdentity.compute(archive)
            if computed != declared {
                collector.add(
                    VerifyFinding(
                        .error, "identity", "the stored identity is \(declared), the archive's is \(computed)",
                        key: ContentIdentity.metadataKey))
            }
        } catch {
            collector.add(VerifyFinding(.error, "identity", "computing the content identity failed: \(error)"))
        }
    }
}
