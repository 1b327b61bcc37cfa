import Foundation

extension TestSupport {
    /// The built `tilepack` command (beside the test bundle, or in `.build/debug`), or `nil`
    /// when it was not built (`swift build --build-tests` and `swift test` build it).
    public static let tilepackBinary: URL? = {
        let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [
            Bundle.main.bundleURL.appendingPathComponent("tilepack"),
            here.appendingPathComponent("tilepack"),
            here.deletingLastPathComponent().appendingPathComponent("tilepack"),
            packageRoot.appendingPathComponent(".build/debug/tilepack"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }()
}
