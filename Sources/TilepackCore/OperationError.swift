/// Why an operation (import, export, convert, verify, info, patch, sync) could not be carried out:
/// the error of every command as a library (TilepackOperations) and of the background requests an
/// app starts (``BackgroundRequest``: a patch, a sync from `TilepackRemote`).
public struct OperationError: Error, Sendable, CustomStringConvertible {
    /// The file or folder concerned.
    public var path: String
    public var fault: Fault

    public init(path: String, fault: Fault) {
        self.path = path
        self.fault = fault
    }

    public enum Fault: Sendable, CustomStringConvertible {
        /// Input that cannot be used as it is.
        case badInput(String)
        /// The flags and what the input says disagree.
        case conflict(String)
        /// An archive could not be read or written.
        case archive(TileArchiveError)
        /// A file could not be read or written.
        case io(String)

        public var description: String {
            switch self {
            case .badInput(let text): text
            case .conflict(let text): text
            case .archive(let error): error.fault.description
            case .io(let text): text
            }
        }
    }

    public var description: String { path.isEmpty ? fault.description : "\(path): \(fault)" }
}

extension OperationError {
    /// An error from a lower layer as an operation error: archive errors keep their own path.
    package static func wrapping(_ error: any Error, path: String) -> OperationError {
        switch error {
        case let error as OperationError: error
        case let error as TileArchiveError: OperationError(path: error.path, fault: .archive(error))
        default: OperationError(path: path, fault: .io("\(error)"))
        }
    }
}
