/// tilepack's version, in one place: the command's `--version` and the `User-Agent` it sends.
package enum TilepackVersion {
    package static let current = "0.1.0"
}
