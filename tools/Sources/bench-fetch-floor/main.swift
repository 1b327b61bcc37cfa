// The HTTP floor of `tilepack fetch`: the same GETs through the same HTTP layer (TilepackHTTP's
// client over the same transport: libcurl's multi interface, or URLSessions, with the same
// requests in flight), bodies counted and dropped: no template, no checks, no store. Run by
// tools/bench-fetch.sh, beside the C floor (curl-fetch-floor).
//
//   bench-fetch-floor <base-url> <paths-file> <in-flight> curl|<sessions>
import Foundation
import Tilepack
import TilepackCurl
import TilepackHTTP

let arguments = CommandLine.arguments
guard arguments.count == 5, let inFlight = Int(arguments[3]), arguments[4] == "curl" || Int(arguments[4]) != nil,
    let list = try? String(contentsOfFile: arguments[2], encoding: .utf8)
else {
    FileHandle.standardError.write(Data("usage: bench-fetch-floor <base-url> <paths-file> <in-flight> curl|<sessions>\n".utf8))
    exit(64)
}
let urls = list.split(separator: "\n").compactMap { URL(string: arguments[1] + $0) }
let clients: [HTTPClient]
if let sessions = Int(arguments[4]) {
    let perSession = (inFlight + sessions - 1) / sessions
    clients = (0..<sessions).map { _ in HTTPClient(maximumConnectionsPerHost: perSession) }
} else {
    #if os(Linux)
    clients = [HTTPClient(transport: CurlTransport(maximumConnectionsPerHost: inFlight))]
    #else
    FileHandle.standardError.write(Data("bench-fetch-floor: the curl transport is built on Linux only\n".utf8))
    exit(69)
    #endif
}
let next = Locked(0)
let bytes = Locked(0)
let start = ContinuousClock.now
await withTaskGroup(of: Void.self) { group in
    for _ in 0..<inFlight {
        group.addTask {
            while true {
                let index: Int? = next.withLock { value in
                    guard value < urls.count else { return nil }
                    value += 1
                    return value - 1
                }
                guard let index else { return }
                if let response = try? await clients[index % clients.count].send(HTTPRequest(url: urls[index])), response.status == 200 {
                    bytes.withLock { $0 += response.body.count }
                } else {
                    FileHandle.standardError.write(Data("failed: \(urls[index])\n".utf8))
                }
            }
        }
    }
}
let elapsed = ContinuousClock.now - start
let seconds = Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds)
print(String(format: "%.1f", Double(urls.count) / seconds))
