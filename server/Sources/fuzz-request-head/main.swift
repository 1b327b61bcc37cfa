// fuzz-request-head: feeds damaged HTTP/1 request heads to the server's head parser
// (`RequestHead.parse`, and `HTTP1Syntax.endOfHead` as a connection uses it while a head arrives
// in pieces); any crash, trap, hang, unbounded allocation or broken invariant is a bug. Run it
// through tools/fuzz-request-head.sh.
//
// Built with `-sanitize=fuzzer -D TILEPACK_LIBFUZZER` (and `-Xcc -DTILEPACK_FUZZING` for
// CFuzzDriver) it is a libFuzzer target (coverage-guided); set TILEPACK_FUZZ_MAKE_CORPUS=DIR to
// write the seed corpus and exit. Built normally it is a seeded random-mutation harness:
//   fuzz-request-head [--seconds N] [--seed S] [--make-corpus DIR]
//
// Input format: byte 0 picks where the head is split in two pieces (as two reads of a
// connection), the rest is the bytes a client sent.
import BenchSupport
import Foundation
@_spi(HTTP1) import TilepackHTTP
import TilepackRequestHead

#if TILEPACK_LIBFUZZER
import CFuzzDriver
#endif

/// Fails loudly (a crash libFuzzer and the harness report) when an invariant breaks.
func require(_ condition: Bool, _ message: @autoclosure () -> String, _ bytes: UnsafeRawBufferPointer) {
    guard !condition else { return }
    fatalError("fuzz-request-head: \(message()) for \(Array(bytes.prefix(256)))")
}

/// Runs one input through the parser as a connection would: the whole, and in two pieces.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    guard let split = input.first else { return }
    let bytes = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    let parse = RequestHead.parse(bytes)
    switch parse {
    case .complete(let head, let length):
        require(length > 0 && length <= bytes.count && length <= RequestHead.maximumSize, "a head of \(length) bytes", bytes)
        require(HTTP1Syntax.endOfHead(bytes, after: 0) != nil, "a complete head without an empty line", bytes)
        // What the parser took is a head alone: the same from those bytes only.
        let again = RequestHead.parse(UnsafeRawBufferPointer(rebasing: bytes[..<length]))
        require(again == .complete(head, length: length), "a head that parses differently alone", bytes)
        require(head.target.utf8.count < bytes.count, "a target longer than the input", bytes)
    case .incomplete:
        require(bytes.count < RequestHead.maximumSize, "an incomplete head past the limit", bytes)
    case .invalid(let status, let reason):
        require([400, 431, 505].contains(status) && !reason.isEmpty, "a refusal \(status) '\(reason)'", bytes)
    }
    // Two reads: the end of a head is found in the second one iff it is found in the whole.
    let first = min(Int(split) * max(1, bytes.count / 255), bytes.count)
    let whole = HTTP1Syntax.endOfHead(bytes, after: 0)
    let early = HTTP1Syntax.endOfHead(UnsafeRawBufferPointer(rebasing: bytes[..<first]), after: 0)
    if early == nil {
        require(HTTP1Syntax.endOfHead(bytes, after: first) == whole, "an end of head missed across reads", bytes)
    }
}

/// Requests as browsers, tile clients and hostile peers send them.
let seeds: [String] = [
    "GET /tiles/6/33/20.png HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: keep-alive\r\n\r\n",
    "HEAD /a.json?token=x HTTP/1.0\r\nConnection: Keep-Alive, Upgrade\r\nIf-None-Match: W/\"b1-2\", \"b3\"\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\nAccess-Control-Request-Method: GET\r\n\r\n",
    "POST http://h:1/x HTTP/1.1\nHost: h\nContent-Length: 3\nTransfer-Encoding: chunked\n\nabc",
    "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer abc\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
    "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n",
    "GET https://example.org HTTP/2.0\r\nhost: a\r\nX-Long: " + String(repeating: "v", count: 600) + "\r\n\r\n",
]

/// Writes the seed corpus (each seed split at its middle and not at all).
func writeCorpus(to directory: String) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    for (i, seed) in seeds.enumerated() {
        for split: UInt8 in [0, 128] {
            try Data([split] + Array(seed.utf8)).write(to: URL(fileURLWithPath: "\(directory)/seed-\(i)-\(split)"))
        }
    }
}

#if TILEPACK_LIBFUZZER

// SwiftPM gives an executable its own main, so libFuzzer's loop is started explicitly.
if let directory = ProcessInfo.processInfo.environment["TILEPACK_FUZZ_MAKE_CORPUS"] {
    try writeCorpus(to: directory)
    exit(0)
}
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
let status = withUnsafeMutablePointer(to: &argv) { argvPointer in
    tilepack_fuzz_run_libfuzzer(&argc, argvPointer) { data, size in
        fuzzOne(UnsafeRawBufferPointer(start: data, count: size))
        return 0
    }
}
exit(status)

#else

// MARK: Seeded random-mutation harness

var seconds = 60.0
var seed: UInt64 = 1
var arguments = CommandLine.arguments.dropFirst().makeIterator()
while let argument = arguments.next() {
    switch argument {
    case "--seconds": seconds = Double(arguments.next() ?? "") ?? seconds
    case "--seed": seed = UInt64(arguments.next() ?? "") ?? seed
    case "--make-corpus":
        try writeCorpus(to: arguments.next() ?? "fuzz-corpus")
        exit(0)
    default:
        print("usage: fuzz-request-head [--seconds N] [--seed S] [--make-corpus DIR]")
        exit(2)
    }
}

// Bytes that matter to HTTP/1's grammar.
let interesting: [UInt8] = [0x0D, 0x0A, 0x20, 0x09, 0x3A, 0x2C, 0x00, 0x7F, 0x80, 0xFF, 0x2F, 0x3F, 0x22, 0x30, 0x39]
let corpus = seeds.map { Array($0.utf8) }
var rng = SplitMix64(seed: seed)
let deadline = Date().addingTimeInterval(seconds)
var runs = 0, slowest = 0.0
while Date() < deadline {
    for _ in 0..<256 {
        var bytes = corpus[rng.below(corpus.count)]
        for _ in 0..<(1 + rng.below(4)) {
            let at = rng.below(bytes.count + 1)
            switch rng.below(7) {
            case 0 where at < bytes.count: bytes[at] ^= UInt8(1 << rng.below(8))
            case 1 where at < bytes.count: bytes.remove(at: at)
            case 2: bytes.insert(interesting[rng.below(interesting.count)], at: at)
            case 3: bytes.removeSubrange(at...)
            case 4:  // a field repeated, or a long run: heads near and past the size limit
                let run = [UInt8](
                    repeating: interesting[rng.below(interesting.count)] | 0x40,
                    count: rng.below(2) == 0 ? 1 + rng.below(64) : RequestHead.maximumSize - 16 + rng.below(32))
                bytes.insert(contentsOf: run, at: at)
            case 5:  // splice with another seed
                let other = corpus[rng.below(corpus.count)]
                let cut = rng.below(min(bytes.count, other.count) + 1)
                bytes = Array(bytes.prefix(cut)) + Array(other.dropFirst(cut))
            default: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 1 + rng.below(16))], at: at)
            }
        }
        let input = [UInt8(truncatingIfNeeded: rng.next())] + bytes
        let started = now()
        input.withUnsafeBytes { fuzzOne($0) }
        let took = now() - started
        slowest = max(slowest, took)
        // A hang: no input of at most ~64 KiB may take a second (libFuzzer's -timeout does this there).
        if took > 1 {
            print("fuzz-request-head: an input of \(input.count) bytes took \(took) s (a hang): \(Array(input.prefix(256)))")
            exit(1)
        }
        runs += 1
    }
}
// Unbounded allocation: the parser keeps nothing, so the process stays small.
let peak = peakResidentBytes()
guard peak < 256 << 20 else {
    print("fuzz-request-head: peak resident memory \(peak >> 20) MiB (over 256 MiB)")
    exit(1)
}
print(
    "fuzz-request-head: \(runs) inputs in \(Int(seconds)) s (seed \(seed), slowest \(String(format: "%.1f", slowest * 1000)) ms, peak \(peak >> 20) MiB): no crash, hang or broken invariant"
)

#endif
