import Foundation
import Testing
import TilepackTestSupport

/// The `tilepack` command itself, run as a process (the build puts it beside the test bundle),
/// with arguments given as bytes.
enum TilepackBinary {
    /// Runs the command with `arguments` (raw bytes allowed), at most `timeout` seconds (`swift
    /// test` builds the binary beside the tests: its absence is a failure).
    static func run(_ arguments: [[UInt8]], timeout: Double = 30) async throws -> (status: Int32, output: String) {
        let url = try #require(TestSupport.tilepackBinary, "the tilepack binary is built beside the tests")
        // Through a /bin/sh script so that arguments that are not UTF-8 reach the command as they are.
        let dir = try TemporaryDirectory("tilepack-cli")
        var script: [UInt8] = Array("exec ".utf8) + shellQuote(Array(url.path.utf8))
        for argument in arguments { script += [UInt8(ascii: " ")] + shellQuote(argument) }
        script.append(UInt8(ascii: "\n"))
        try Data(script).write(to: URL(fileURLWithPath: dir.file("run.sh")))
        let result = try await TestSupport.run(URL(fileURLWithPath: "/bin/sh"), [dir.file("run.sh")], timeout: timeout)
        // The command's own time, not this task's (which waits for a thread of a busy test process).
        if result.timedOut { Issue.record("tilepack ran for more than \(timeout) s") }
        return (result.status, result.stdout + result.stderr)
    }

    static func run(_ arguments: [String], timeout: Double = 30) async throws -> (status: Int32, output: String) {
        try await run(arguments.map { Array($0.utf8) }, timeout: timeout)
    }

    /// `'...'` for the shell, every byte kept (a quote inside becomes '\'').
    static func shellQuote(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "'")]
        for byte in bytes {
            if byte == UInt8(ascii: "'") { out += Array("'\\''".utf8) } else { out.append(byte) }
        }
        out.append(UInt8(ascii: "'"))
        return out
    }
}

@Suite struct CommandLineTests {
    /// A canvas larger than 8192 pixels a side is refused at once, before any memory is taken
    /// (before: 8192x8192 at --scale 3 took 4.7 GB).
    @Test func renderBoundsTheCanvas() async throws {
        let dir = try TemporaryDirectory()
        let result = try await TilepackBinary.run(
                [
                    "render", "file:///nonexistent/{z}/{x}/{y}.png", "--center", "0,0", "--zoom", "2",
                    "--size", "8192x8192", "--scale", "3", "--timeout", "1", "-o", dir.file("map.png"),
                ],
                timeout: 20)
        #expect(result.status != 0)
        #expect(result.output.contains("24576x24576 pixel PNG") && result.output.contains("at most 8192 pixels a side"), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("map.png")))
    }
}

extension CommandLineTests {
    /// Two output names that differ only in bytes that are not UTF-8 are two files, and each is
    /// read back by its own name (before: both became one file, and the input was refused).
    @Test func namesThatAreNotUTF8AreKeptAsBytes() async throws {
        let dir = try TemporaryDirectory()
        let tree = dir.file("tree")
        try FileManager.default.createDirectory(atPath: tree + "/0/0", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: TestSupport.packageRoot.appendingPathComponent("samples/tiles/0/0/0.png").path,
            toPath: tree + "/0/0/0.png")
        let first = Array(dir.file("a").utf8) + [0xE9] + Array(".mbtiles".utf8)
        let second = Array(dir.file("a").utf8) + [0xE8] + Array(".mbtiles".utf8)
        for name in [first, second] {
            let result = try await TilepackBinary.run([Array("import".utf8), Array(tree.utf8), name])
            #expect(result.status == 0 || result.status == 3, "\(result.output)")
        }
        // Two files, by their exact bytes.
        var names: [[UInt8]] = []
        if let folder = opendir(dir.path) {
            while let entry = readdir(folder) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { Array($0.prefix { $0 != 0 }) }
                if name.last == UInt8(ascii: "s") && name.first == UInt8(ascii: "a") { names.append(name) }
            }
            closedir(folder)
        }
        #expect(Set(names) == Set([first, second].map { Array($0.suffix(10)) }), "\(names)")
        for name in [first, second] {
            let result = try await TilepackBinary.run([Array("info".utf8), name])
            #expect(result.status == 0, "\(result.output)")
        }
        // render reads such a name and writes one.
        let png = Array(dir.file("m").utf8) + [0xE9] + Array(".png".utf8)
        let rendered = try await TilepackBinary.run(
                [Array("render".utf8), first] + ["--center", "0,0", "--zoom", "0", "--size", "64x64", "-o"].map { Array($0.utf8) } + [png])
        #expect(rendered.status == 0, "\(rendered.output)")
        let exists = (png + [0]).withUnsafeBufferPointer {
            $0.withMemoryRebound(to: CChar.self) { pointer -> Bool in
                var info = stat()
                return lstat(pointer.baseAddress!, &info) == 0
            }
        }
        #expect(exists)
    }
}
