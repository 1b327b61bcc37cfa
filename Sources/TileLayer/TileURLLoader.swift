import Foundation
import TilepackCore
import TilepackHTTP

/// Why a tile could not be loaded from a URL or turned into a bitmap.
public enum TileLoadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The data source gave no URL (or the template is nil and no override builds one).
    case noURL(TileCoordinate)
    /// Only `file:`, `http:` and `https:` URLs are loaded.
    case unsupportedScheme(String)
    /// Reading a local file failed.
    case file(path: String, reason: String)
    /// The server answered with a status other than 200.
    case httpStatus(url: String, status: Int)
    /// The connection or the transfer failed.
    case network(url: String, reason: String)
    /// The body is larger than `TileURLLoader/maximumTileBytes`.
    case tooLarge(url: String, limit: Int)
    /// The bytes are not an image tilepack decodes, or the image is damaged.
    case undecodable(url: String, reason: String)
    /// The image decodes but its size is not one a layer of `expected` px tiles accepts
    /// (see ``TileImageSize``).
    case wrongSize(url: String, expected: Int, width: Int, height: Int)

    public var description: String {
        switch self {
        case .noURL(let tile): "no URL for tile \(tile)"
        case .unsupportedScheme(let url): "\(url): only file, http and https URLs are loaded"
        case .file(let path, let reason): "\(path): \(reason)"
        case .httpStatus(let url, let status): "\(url): HTTP status \(status)"
        case .network(let url, let reason): "\(url): \(reason)"
        case .tooLarge(let url, let limit): "\(url): the tile is larger than \(limit) bytes"
        case .undecodable(let url, let reason): "\(url): \(reason)"
        case .wrongSize(let url, let expected, let width, let height):
            "\(url): the image is \(width)x\(height) pixels; \(TileImageSize.describe(tileSize: expected))"
        }
    }
}

/// Loads the bytes of a tile image from a `file:` or `http(s):` URL.
package enum TileURLLoader {
    /// The largest tile body accepted: 16 MiB (a 2048x2048 RGBA PNG stored uncompressed).
    package static let maximumTileBytes = 16 << 20
    /// How long one http(s) tile may take, from the request to the body's last byte.
    package static let timeout = Duration.seconds(30)

    /// The bytes at `url`.
    /// - Throws: ``TileLoadError`` naming the URL and the fault.
    package static func load(_ url: URL) async throws(TileLoadError) -> Data {
        switch url.scheme?.lowercased() {
        case "file":
            return try loadFile(url.path)
        case "http", "https":
            return try await loadHTTP(url)
        default:
            throw .unsupportedScheme(url.absoluteString)
        }
    }

    static func loadFile(_ path: String) throws(TileLoadError) -> Data {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw .file(path: path, reason: FileManager.default.fileExists(atPath: path) ? "cannot be opened" : "no such file")
        }
        defer { try? handle.close() }
        do {
            let data = try handle.read(upToCount: maximumTileBytes + 1) ?? Data()
            guard data.count <= maximumTileBytes else { throw TileLoadError.tooLarge(url: path, limit: maximumTileBytes) }
            return data
        } catch let error as TileLoadError {
            throw error
        } catch {
            throw .file(path: path, reason: "\(error)")
        }
    }

    static func loadHTTP(_ url: URL) async throws(TileLoadError) -> Data {
        let text = url.absoluteString
        let response: HTTPResponse
        do {
            response = try await HTTPClient.shared.send(HTTPRequest(url: url, timeout: timeout, maximumBodyBytes: maximumTileBytes))
        } catch {
            if case .tooLarge = error.fault { throw .tooLarge(url: text, limit: maximumTileBytes) }
            throw .network(url: text, reason: error.reason)
        }
        guard response.status == 200 else { throw .httpStatus(url: text, status: response.status) }
        return response.body
    }
}
