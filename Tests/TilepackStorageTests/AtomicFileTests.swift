import Foundation
import Testing
import TilepackCore
import TilepackStorage
import TilepackTestSupport

@Suite struct AtomicFileTests {
    @Test func commitRenamesIntoPlace() throws {
        let dir = try TemporaryDirectory()
        let destination = dir.file("out.bin")
        let file = try AtomicFile(destination: destination, overwrite: false)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: file.temporaryPath))
        #expect(!FileManager.default.fileExists(atPath: destination))
        try file.commit()
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == Data("hello".utf8))
        #expect(!FileManager.default.fileExists(atPath: file.temporaryPath))
    }

    @Test func droppingWithoutCommitLeavesNothing() throws {
        let dir = try TemporaryDirectory()
        let destination = dir.file("out.bin")
        var temporary = ""
        do {
            let file = try AtomicFile(destination: destination, overwrite: false)
            temporary = file.temporaryPath
            try Data("partial".utf8).write(to: URL(fileURLWithPath: temporary))
        }
        #expect(!FileManager.default.fileExists(atPath: temporary))
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test func refusesToOverwriteUnlessAsked() throws {
        let dir = try TemporaryDirectory()
        let destination = dir.file("out.bin")
        try Data("old".utf8).write(to: URL(fileURLWithPath: destination))
        #expect(throws: TileArchiveError(path: destination, fault: .alreadyExists)) {
            try AtomicFile(destination: destination, overwrite: false)
        }
        let file = try AtomicFile(destination: destination, overwrite: true)
        try Data("new".utf8).write(to: URL(fileURLWithPath: file.temporaryPath))
        try file.commit()
        #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == Data("new".utf8))
    }
}
