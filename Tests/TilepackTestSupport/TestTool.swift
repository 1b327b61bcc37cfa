import Foundation

/// A program or Python package some tests use as a peer or an independent witness (never
/// tilepack itself, whose binary `swift test` always builds).
///
/// A test that needs one declares it with
/// `.enabled(if: TestTool.nginx.canRun, TestTool.nginx.skipped)` (`Testing.Comment(rawValue:)`):
/// it runs where the tool is installed, and in CI (`CI` set), where `.ci/run` installs every tool
/// and a missing one fails the test; elsewhere the runner reports it skipped with the reason and
/// how to get the tool, never as passed.
public enum TestTool: String, CaseIterable, Sendable {
    case nginx, curl, flock, gdalwarp
    /// moto's S3 server with botocore and boto3 (PyPI `moto[server]`).
    case motoServer
    /// botocore alone (comparing request signatures).
    case botocore
    /// Python's `pmtiles`, the PMTiles reference implementation.
    case pmtilesPython
    /// Python's `mercantile` and `shapely`, the region cover witness.
    case regionWitness
    /// PyPI's `cryptography` (Ed25519), for tools/verify_signed.py, the signed archive witness.
    case cryptographyPython

    /// Whether the tool is installed here (asked once per process).
    public var isInstalled: Bool { Self.installed[self] ?? false }

    /// Whether a test that needs it runs: installed, or in CI.
    public var canRun: Bool { isInstalled || ProcessInfo.processInfo.environment["CI"] != nil }

    /// The runner's reason for skipping a test that needs it: what is missing and how to get it.
    public var skipped: String {
        switch self {
        case .nginx: "nginx is not installed: apt-get install nginx-light (as .ci/run does)"
        case .curl: "curl is not installed: apt-get install curl (as .ci/run does)"
        case .flock: "flock(1) is not installed: apt-get install util-linux"
        case .gdalwarp: "GDAL's gdalwarp (the witness) is not installed: apt-get install gdal-bin (as .ci/run does)"
        case .motoServer: "moto's S3 server is not installed: python3 -m pip install 'moto[server]' (as .ci/run does)"
        case .botocore: "botocore is not installed: python3 -m pip install 'moto[server]' (as .ci/run does)"
        case .pmtilesPython:
            "Python's pmtiles (the PMTiles witness) is not installed: python3 -m pip install 'pmtiles==3.8.1' (as .ci/run does)"
        case .regionWitness:
            "mercantile and shapely (the region cover witness) are not installed: python3 -m pip install 'mercantile==1.2.1' 'shapely==2.2.0' (as .ci/run does)"
        case .cryptographyPython:
            "Python's cryptography (Ed25519 for tools/verify_signed.py, the signing witness) is not installed: python3 -m pip install 'cryptography' (as .ci/run does)"
        }
    }

    private static let installed: [TestTool: Bool] = {
        var found: [TestTool: Bool] = [:]
        for tool in allCases {
            found[tool] =
                switch tool {
                case .nginx, .curl, .flock, .gdalwarp: program(tool.rawValue)
                case .motoServer: TestSupport.pythonImports("moto.server, boto3, flask, botocore")
                case .botocore: TestSupport.pythonImports("botocore")
                case .pmtilesPython: TestSupport.pythonImports("pmtiles")
                case .regionWitness: TestSupport.pythonImports("mercantile, shapely")
                case .cryptographyPython: TestSupport.pythonImports("cryptography.hazmat.primitives.asymmetric.ed25519")
                }
        }
        return found
    }()

    /// A program in one of the folders Debian's packages and pip install into.
    private static func program(_ name: String) -> Bool {
        let home = ProcessInfo.processInfo.environment["HOME"] ?? ""
        return ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin", "\(home)/.pyenv/shims", "\(home)/.local/bin"]
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(name)") }
    }
}

#if canImport(Testing)
import Testing

extension Trait where Self == ConditionTrait {
    /// Runs the test where `tool` is installed, and in CI (where a missing tool fails it); else the
    /// runner reports it skipped with ``TestTool/skipped``.
    public static func needs(_ tool: TestTool) -> Self {
        .enabled(if: tool.canRun, Comment(rawValue: tool.skipped))
    }
}
#endif
