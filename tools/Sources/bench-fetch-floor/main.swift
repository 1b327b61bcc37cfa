// The HTTP floor of `tilepack fetch`: the same GETs through the same HTTP layer (TilepackHTTP's
// URLSession client, the same number of sessions and requests in flight), bodies counted and
// dropped: no template, no checks, no store. Run by tools/bench-fetch.sh.
//
//   bench-fetch-floor <base-url> <paths-file> <in-flight> <sessions>
import Foundation
import Tilepack
import TilepackHTTP

let arguments = CommandLine.arguments
guard arguments.count == 5, let inFlight = Int(arguments[3]), let sessions = Int(arguments[4]),
      let list = try? String(contentsOfFile: arguments[2], encoding: .utf8) else {
    FileHandle.standardError.write(Data("usage: bench-fetch-floor <base-url> <paths-file> <in-flight> <sessions>\n".utf8))
    exit(64)
}
let urls = list.split(separator: "\n").compactMap { URL(string: arguments[1] + $0) }
let perSession = (inFlight + sessions - 1) / sessions
let clients = (0..<sessions).map { _ in HTTPClient(maximumConnectionsPerHost: perSession) }
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
let seconds = Double((ContinuousClock.now - start).components.attoseconds) / 1e18 + Double((ContinuousClock.now - start).components.seconds)
print(String(format: "%.1f", Double(urls.count) / seconds))
