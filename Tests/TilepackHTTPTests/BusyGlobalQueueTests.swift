import Dispatch
import Foundation
import Testing
import TilepackCore
import TilepackHTTP
import TilepackTestSupport

/// An app whose own work holds Dispatch's global queue (blocking reads, semaphores, long
/// computations) still gets its answers: no transport runs its callbacks or deadlines there.
/// The global queue starts with as many threads as the machine has cores and adds one a second
/// while they block, so a transport that answered through it would wait as many seconds as there
/// are held threads.
@Suite struct BusyGlobalQueueTests {
    @Test(arguments: TestTransport.available)
    func answersArriveWhileTheGlobalQueueIsHeld(_ transport: TestTransport) async throws {
        let server = try LoopbackHTTPServer { _ in .respond(status: 200, headers: [:], body: Data("ok".utf8)) }
        defer { server.stop() }
        let client = transport.client()

        // 40 work items that each hold a global thread until they are let go: after the answer,
        // or, if it has not come, by a watchdog on a queue of its own after 20 s (the global
        // queue would have grown by about 20 threads by then: the answer needs all 40 held).
        let blockers = 40
        let letGo = DispatchSemaphore(value: 0)
        let released = Locked(false)
        let release: @Sendable () -> Bool = {
            guard released.withLock({ was in defer { was = true }; return !was }) else { return false }
            for _ in 0..<blockers { letGo.signal() }
            return true
        }
        for _ in 0..<blockers { DispatchQueue.global().async { letGo.wait() } }
        DispatchQueue(label: "watchdog").asyncAfter(deadline: .now() + 20) { _ = release() }

        // Sent from a task of high priority: Swift's tasks of default priority run on the same
        // threads as the global queue's default work (libdispatch's pool for that priority), so
        // a test awaiting there would wait for the held threads whatever the transport did.
        let url = URL(string: server.baseURL + "/tile")!
        let (response, answeredWhileHeld) = try await Task.detached(priority: .high) {
            let response = try await client.send(HTTPRequest(url: url))
            return (response, release())
        }.value
        #expect(response.status == 200)
        #expect(response.body == Data("ok".utf8))
        #expect(answeredWhileHeld, "the answer came only after the global queue was let go")
    }
}
