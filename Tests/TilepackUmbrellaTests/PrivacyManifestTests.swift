import Foundation
import Testing

/// The `Tilepack` target's privacy manifest (Apple requires one for the file-timestamp APIs) is a
/// valid property list that declares what the library's sources call.
@Suite struct PrivacyManifestTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func declaresTheFileTimestampAPIsTheLibraryCalls() throws {
        let data = try Data(contentsOf: Self.root.appendingPathComponent("Sources/Tilepack/PrivacyInfo.xcprivacy"))
        let manifest = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
        #expect(manifest["NSPrivacyTracking"] as? Bool == false)
        let types = try #require(manifest["NSPrivacyAccessedAPITypes"] as? [[String: Any]])
        let declared = Dictionary(
            uniqueKeysWithValues: types.compactMap { entry -> (String, [String])? in
                guard let type = entry["NSPrivacyAccessedAPIType"] as? String else { return nil }
                return (type, entry["NSPrivacyAccessedAPITypeReasons"] as? [String] ?? [])
            })
        // The library (what an app links) calls stat and fstat: file versions, archives, the disk cache.
        var callers: [String] = []
        for module in ["TilepackCore", "TilepackStorage", "TileLayer", "TilepackPrefetch", "TilepackAdapter"] {
            let folder = Self.root.appendingPathComponent("Sources/\(module)")
            for case let file as URL in FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)!
            where file.pathExtension == "swift" {
                let text = try String(contentsOf: file, encoding: .utf8)
                if text.range(of: #"\b[fl]?stat\("#, options: .regularExpression) != nil { callers.append(file.lastPathComponent) }
            }
        }
        #expect(!callers.isEmpty)
        #expect(declared["NSPrivacyAccessedAPICategoryFileTimestamp"] == ["C617.1"], "called in \(callers)")
    }
}
