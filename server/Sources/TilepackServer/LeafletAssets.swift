import Foundation

/// Leaflet, read once at start from Debian's `libjs-leaflet` folder (`leaflet.js`, `leaflet.css`,
/// `images/*.png`) into a fixed table: requests under `/_/leaflet/` are looked up in it and never
/// reach the file system. Nothing is loaded from the internet.
struct LeafletAssets: Sendable {
    /// The folder the files were read from.
    let folder: String
    /// Served files by their path under `/_/leaflet/`, with their content types.
    let files: [String: (contentType: String, bytes: [UInt8])]
    /// Why Leaflet is not available, when it is not (shown on the preview page).
    let problem: String?

    /// The largest file read (Leaflet's files are a few hundred kilobytes).
    static let maximumFileSize = 4 << 20

    init(folder: String) {
        self.folder = folder
        var files: [String: (String, [UInt8])] = [:]
        func read(_ relative: String, _ type: String) {
            let path = folder + "/" + relative
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
                let size = attributes[.size] as? Int, size <= Self.maximumFileSize,
                let data = FileManager.default.contents(atPath: path)
            else { return }
            files[relative] = (type, [UInt8](data))
        }
        read("leaflet.js", "text/javascript; charset=utf-8")
        read("leaflet.css", "text/css; charset=utf-8")
        let images = (try? FileManager.default.contentsOfDirectory(atPath: folder + "/images")) ?? []
        for image in images.sorted() where image.hasSuffix(".png") && !image.contains("/") {
            read("images/" + image, "image/png")
        }
        self.files = files
        if files["leaflet.js"] == nil || files["leaflet.css"] == nil {
            problem =
                "Leaflet was not found in \(folder) (leaflet.js and leaflet.css): install Debian's libjs-leaflet "
                + "(apt-get install libjs-leaflet, or bash .ci/run --deps-only) or pass --leaflet-path FOLDER."
        } else {
            problem = nil
        }
    }
}
