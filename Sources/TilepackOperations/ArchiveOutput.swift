import TilepackCore
import TilepackStorage

/// An operation's output archive, written through Storage's write door
/// (``openTileSink(path:format:metadata:options:)``); errors are the operation's, naming it.
enum ArchiveOutput {
    /// The format `destination`'s extension chooses.
    static func format(of destination: String) throws(OperationError) -> TileArchiveFormat {
        do { return try TileArchiveFormat(destinationPath: destination) } catch {
            throw OperationError(path: destination, fault: .badInput(error.fault.description))
        }
    }

    /// The sink that writes `destination` in `format`.
    /// - Parameter encode: the pixel format tiles are decoded into (`--encode`), which only a
    ///   bundle stores: refused for any other format before anything is read.
    static func open(
        _ destination: String, format: TileArchiveFormat, metadata: TileMetadata, encode: PixelFormat? = nil, options: TileSinkOptions
    ) throws(OperationError) -> TileSink {
        if encode != nil && !format.storesRawPixels {
            throw OperationError(path: destination, fault: .badInput("raw pixels (--encode) can only be stored in a .tilepack bundle"))
        }
        do {
            return try openTileSink(path: destination, format: .archive(format), metadata: metadata, options: options)
        } catch {
            guard case .cannotWrite(let reason) = error.fault else { throw OperationError(path: destination, fault: .archive(error)) }
            throw OperationError(path: destination, fault: .badInput(reason))
        }
    }
}
