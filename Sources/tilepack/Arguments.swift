import ArgumentParser
import TilepackCore
import TilepackOperations

extension TileScheme: ExpressibleByArgument {}
extension TileTreeLayout: ExpressibleByArgument {}

/// `--encode raw-rgba` and friends: decode at import and store raw pixels in a bundle.
struct RawEncoding: ExpressibleByArgument {
    var pixelFormat: PixelFormat

    static let names: [String: PixelFormat] = [
        "raw-rgba": .rgba8888, "raw-bgra": .bgra8888,
        "raw-rgba-premultiplied": .rgba8888Premultiplied, "raw-bgra-premultiplied": .bgra8888Premultiplied,
        "raw-rgb": .rgb888, "raw-rgb565": .rgb565,
    ]

    init?(argument: String) {
        guard let format = Self.names[argument.lowercased()] else { return nil }
        pixelFormat = format
    }

    static var allValueStrings: [String] { names.keys.sorted() }
}

/// `--bbox west,south,east,north` in degrees.
struct BoundingBoxArgument: ExpressibleByArgument {
    var box: GeoBoundingBox

    init?(argument: String) {
        let numbers = argument.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard numbers.count == 4, numbers.allSatisfy(\.isFinite),
              (-180...180).contains(numbers[0]), (-180...180).contains(numbers[2]),
              (-90...90).contains(numbers[1]), (-90...90).contains(numbers[3]), numbers[1] <= numbers[3]
        else { return nil }
        box = GeoBoundingBox(west: numbers[0], south: numbers[1], east: numbers[2], north: numbers[3])
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

/// Flags every command that runs long shares.
/// How many worker threads an operation uses.
struct ThreadOptions: ParsableArguments {
    @Option(help: "Worker threads (default: one per core).")
    var threads: Int?

    func validate() throws {
        if let threads, !(1...256).contains(threads) {
            throw ValidationError("--threads must be between 1 and 256, not \(threads)")
        }
    }
}

struct OutputOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "No progress bar.")
    var quiet = false

    @Flag(help: "Print the result as JSON on standard output.")
    var json = false
}
