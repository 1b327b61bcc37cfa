import CFuzzDriver
import Foundation

/// Runs libFuzzer's loop over `callback` when the program was built for it (tools/fuzz-*.sh:
/// -sanitize=fuzzer and -DTILEPACK_FUZZING) and exits with its status; returns when it was not,
/// for the target's seeded mutation loop.
public func runLibFuzzerIfBuilt(_ callback: tilepack_fuzz_callback) {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    let status = withUnsafeMutablePointer(to: &argv) { argvPointer in
        tilepack_fuzz_run_libfuzzer(&argc, argvPointer, callback)
    }
    if status != -1 { exit(status) }
}

/// The seeded mutation loop's command line, `[--seconds N] [--seed S] CORPUS_DIR...`, and the
/// seed files of those folders (in name order). Exits 2 naming the target when there are none.
public struct SeededFuzzRun {
    public var seconds = 60.0
    public var seed: UInt64 = 1
    public var directories: [String] = []
    public var seeds: [[UInt8]] = []

    public init(target: String, arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        var args = arguments[...]
        while let arg = args.popFirst() {
            switch arg {
            case "--seconds": seconds = Double(args.popFirst() ?? "") ?? seconds
            case "--seed": seed = UInt64(args.popFirst() ?? "") ?? seed
            default: directories.append(arg)
            }
        }
        for dir in directories {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir))?.sorted() ?? [] {
                if let data = FileManager.default.contents(atPath: dir + "/" + name) { seeds.append([UInt8](data)) }
            }
        }
        guard !seeds.isEmpty else {
            print("\(target): no seed files in \(directories)")
            exit(2)
        }
    }
}
