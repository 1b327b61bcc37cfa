import Foundation
import NIOCore
import Testing
import TilepackCore
import TilepackTestSupport

@testable import TilepackServer

/// What a hostile or unlucky peer gets (issue 29): a busy port, clients that trickle request
/// heads past the connection limit, FIFOs where archives should be.
@Suite struct HostilePeerTests {
    /// Item 7: the address in use is named, with what to do.
    @Test func aBusyPortIsNamedWithWhatToDo() async throws {
        let first = try await RunningServer.start(TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        let second = try TileServer(
            options: TileServerOptions(archivePaths: [ServerFixtures.sampleBundle], port: first.port), log: { _ in })
        var message = "it listened"
        do {
            try await second.run(handlingSignals: false) { _ in }
        } catch {
            message = "\(error)"
        }
        await first.stop()
        #expect(message.contains("127.0.0.1:\(first.port)") && message.contains("in use") && message.contains("--port"), "\(message)")
    }

    /// Item 19: a head still arriving `headerTimeout` after its first byte is answered 408 and
    /// closed, however steadily its bytes come (each one resets the idle timeout).
    @Test func aHeadTrickledPastTheHeaderTimeoutGets408() async throws {
        var options = TileServerOptions(archivePaths: [ServerFixtures.sampleBundle])
        options.headerTimeout = 0.5
        options.idleTimeout = 30
        let server = try await RunningServer.start(options)
        let port = server.port
        let connection = try RawConnection(port: port, readTimeout: 10)
        try connection.transmit("GET /sample/0/0/0.png HTTP/1.1\r\nHost: x\r\n")
        let stop = Locked(false)
        let trickler = Task {
            try await onThread {
                for _ in 0..<100 where !stop.withLock({ $0 }) {
                    guard (try? connection.transmit("X: 1\r\n")) != nil else { return }
                    usleep(100_000)
                }
            }
        }
        let started = Date()
        let received = try await onThread { try connection.readUntilClosed() }
        let elapsed = Date().timeIntervalSince(started)
        stop.withLock { $0 = true }
        _ = try? await trickler.value
        await server.stop()
        let answers = try RawConnection.answers(in: received)
        #expect(answers.map(\.status) == [408], "\(answers.map(\.status)) after \(elapsed) s")
        #expect(answers.first?.text.contains("0.5 s") == true)
        #expect(elapsed < 5, "closed after \(elapsed) s")
    }

    /// Item 19: clients that open connections and trickle heads, three times `--max-connections`
    /// of them, do not lock other clients out: at the limit the connection longest without a
    /// request makes room.
    @Test func wellBehavedClientsAreServedWhileTricklersExceedTheConnectionLimit() async throws {
        var options = TileServerOptions(archivePaths: [ServerFixtures.sampleBundle])
        options.maximumConnections = 8
        let server = try await RunningServer.start(options)
        let port = server.port
        let tricklers = try (0..<24).map { _ in try RawConnection(port: port, readTimeout: 1) }
        let stop = Locked(false)
        let trickling = Task {
            try await onThread {
                for connection in tricklers { _ = try? connection.transmit("GET /sample/0/0/0.png HTTP/1.1\r\n") }
                while !stop.withLock({ $0 }) {
                    for connection in tricklers { _ = try? connection.transmit("X") }
                    usleep(200_000)
                }
            }
        }
        try await Task.sleep(for: .seconds(1.5))
        var answers: [(status: Int, seconds: Double)] = []
        for _ in 0..<3 {
            let started = Date()
            let status = (try? await server.get("/sample/0/0/0.png"))?.status ?? 0
            answers.append((status, Date().timeIntervalSince(started)))
        }
        stop.withLock { $0 = true }
        _ = try? await trickling.value
        // Done: their FIN closes the connections still open (graceful shutdown waits for them).
        for connection in tricklers { connection.finishSending() }
        await server.stop()
        #expect(answers.allSatisfy { $0.status == 200 && $0.seconds < 8 }, "\(answers)")
    }

    /// Item 16: a FIFO renamed over a served archive is reported by `/_/health` (not "ok"), does
    /// not stop the watcher (the next good file is served), and the last good version stays served.
    @Test func aFIFORenamedOverAServedArchiveIsReportedAndReloadsGoOn() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("live.tilepack")
        try FileManager.default.copyItem(atPath: ServerFixtures.sampleBundle, toPath: path)
        let server = try await RunningServer.start(TileServerOptions(archivePaths: [path], reloadInterval: 0.05))
        let fifo = directory.file("fifo")
        #expect(mkfifo(fifo, 0o644) == 0)
        #expect(rename(fifo, path) == 0)
        var health = ""
        let reported = await eventually(10) {
            health = (try? RawHTTP.send(port: server.port, target: "/_/health").text) ?? ""
            return health.contains("\"degraded\"")
        }
        #expect(reported, "health: \(health)")
        #expect(health.contains("FIFO"), "\(health)")
        #expect(try await server.get("/live/0/0/0.png").status == 200, "the last good version stays served")

        let replacement = directory.file("next.tilepack")
        try FileManager.default.copyItem(atPath: ServerFixtures.sampleBundle, toPath: replacement)
        #expect(rename(replacement, path) == 0)
        let reloaded = await eventually(10) {
            health = (try? RawHTTP.send(port: server.port, target: "/_/health").text) ?? ""
            return health.contains("\"ok\"") && health.contains("\"reloads\":1")
        }
        #expect(reloaded, "health: \(health)")
        await server.stop()
    }

    /// Item 16: health says when the reload watcher has not finished a look at the files for long.
    @Test func healthSaysDegradedWhenTheReloadWatcherStalls() throws {
        let service = try TileService(options: TileServerOptions(archivePaths: [ServerFixtures.sampleBundle]))
        service.lastReloadCheck.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        let fresh = service.respond(to: TileServiceTests.request("/_/health"))
        let freshText = fresh.body.map { String(buffer: $0) } ?? ""
        #expect(freshText.contains("\"status\":\"ok\""), "\(freshText)")
        service.lastReloadCheck.store(1, ordering: .relaxed)
        let stale = service.respond(to: TileServiceTests.request("/_/health"))
        let staleText = stale.body.map { String(buffer: $0) } ?? ""
        #expect(staleText.contains("\"status\":\"degraded\"") && staleText.contains("reload watcher is stuck"), "\(staleText)")
    }
}
