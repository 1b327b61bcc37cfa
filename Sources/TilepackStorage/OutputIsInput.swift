import TilepackCore

/// The one check that a command's output is not one of its inputs: writing an archive over the
/// file it reads loses tiles (an extract into its own input kept 55 of 399). Files are compared by
/// identity (device and inode), so a link, a hard link, `./` or any other spelling of the same
/// file is caught; an output that does not exist yet and remote inputs pass.
package enum OutputIsInput {
    /// Throws when `output` is the same file as one of `inputs`, naming both.
    package static func refuse(output: String, inputs: [String]) throws(OperationError) {
        guard let target = FileSystem.stat(output) else { return }
        // A URL (http, https, s3) names no file here.
        for input in inputs where !input.contains("://") {
            guard let info = FileSystem.stat(input), info.st_dev == target.st_dev, info.st_ino == target.st_ino else { continue }
            let spelled = input == output ? "" : " (\(input) and \(output) are the same file)"
            throw OperationError(
                path: output,
                fault: .badInput(
                    "the output is the input \(input)\(spelled): write to another path"))
        }
    }
}
