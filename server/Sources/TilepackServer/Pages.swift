import Foundation
import TilepackCore

/// The HTML pages: the index of archives and each archive's preview map. Every value that comes
/// from an archive (names, metadata) is escaped: an archive is input like any other.
enum Pages {
    static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    /// JSON that can stand inside a `<script>` element (no `<`, `>` or `&` that could close it).
    static func scriptJSON(_ object: Any) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("null".utf8)
        return String(decoding: data, as: UTF8.self)
            .replacingOccurrences(of: "<", with: "\\u003c")
            .replacingOccurrences(of: ">", with: "\\u003e")
            .replacingOccurrences(of: "&", with: "\\u0026")
            .replacingOccurrences(of: "\u{2028}", with: "\\u2028")
            .replacingOccurrences(of: "\u{2029}", with: "\\u2029")
    }

    static func describeZooms(_ generation: ArchiveGeneration) -> String {
        generation.zooms.map { "\($0.lowerBound)-\($0.upperBound)" } ?? "none"
    }

    /// `GET /`: the archives, each with its preview and TileJSON.
    static func index(_ generations: [ArchiveGeneration], base: String, query: String) -> [UInt8] {
        var rows = ""
        for generation in generations {
            let name = percentEncodedSegment(generation.name)
            rows += """
                <tr><td><a href="\(escaped("\(base)/\(name)/\(query)"))">\(escaped(generation.name))</a></td>\
                <td>\(escaped(generation.content?.description ?? "empty"))</td>\
                <td>\(generation.tileCount)</td><td>\(describeZooms(generation))</td>\
                <td><a href="\(escaped("\(base)/\(name).json\(query)"))">TileJSON</a></td>\
                <td>\(escaped(generation.path))</td></tr>

                """
        }
        return Array(
            """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>tilepack serve</title>
            <style>body{font:14px/1.4 sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:4px 12px;border-bottom:1px solid #ddd;text-align:left}</style>
            </head><body><h1>tilepack serve</h1>
            <table><tr><th>archive</th><th>content</th><th>tiles</th><th>zooms</th><th>metadata</th><th>file</th></tr>
            \(rows)</table>
            <p><a href="\(escaped("\(base)/_/health\(query)"))">health</a> · <a href="\(escaped("\(base)/_/metrics\(query)"))">metrics</a></p>
            </body></html>

            """.utf8)
    }

    /// `GET /{name}/`: a full-window Leaflet map of the archive. Raster archives show their
    /// tiles; vector archives show their tile grid with each tile's size (asked with `HEAD`).
    /// The view can be set with `#zoom/latitude/longitude` and follows the map as it moves.
    static func preview(_ generation: ArchiveGeneration, leaflet: LeafletAssets, base: String, query: String) -> [UInt8] {
        let title = escaped(generation.name)
        if let problem = leaflet.problem {
            return Array(
                """
                <!doctype html>
                <html lang="en"><head><meta charset="utf-8"><title>\(title) · tilepack</title></head>
                <body style="font:14px/1.4 sans-serif;margin:2em"><h1>\(title)</h1>
                <p id="problem">The map cannot be shown. \(escaped(problem))</p>
                <p><a href="\(escaped("\(base)/\(percentEncodedSegment(generation.name)).json\(query)"))">TileJSON</a></p>
                </body></html>

                """.utf8)
        }
        return Array(
            """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>\(title) · tilepack</title>
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <link rel="stylesheet" href="\(escaped("\(base)/_/leaflet/leaflet.css\(query)"))">
            <style>
            html,body,#map{margin:0;padding:0;width:100%;height:100%;background:#ddd}
            .tp-info{background:rgba(255,255,255,.9);padding:6px 8px;font:12px/1.4 sans-serif;max-width:300px;border-radius:4px}
            .tp-grid{box-sizing:border-box;border:1px solid rgba(160,0,0,.55);font:12px/1.3 monospace;color:#600;
              display:flex;flex-direction:column;align-items:center;justify-content:center;text-align:center}
            </style></head>
            <body><div id="map"></div>
            <script src="\(escaped("\(base)/_/leaflet/leaflet.js\(query)"))"></script>
            <script>
            "use strict";
            const archive = \(scriptJSON(previewFacts(generation, base: base, query: query)));
            \(previewScript)
            </script>
            </body></html>

            """.utf8)
    }

    /// What the preview's script knows of the archive (the `archive` object of ``previewScript``).
    private static func previewFacts(_ generation: ArchiveGeneration, base: String, query: String) -> [String: Any] {
        let zooms = generation.zooms ?? 0...0
        let center = TileJSON.center(generation)
        let box = generation.bounds
        return [
            "name": generation.name,
            "tiles": TileJSON.tileTemplate(generation, base: base, query: query),
            "tilejson": "\(base)/\(percentEncodedSegment(generation.name)).json\(query)",
            "index": "\(base)/\(query)",
            "content": generation.content?.description ?? "empty",
            "vector": generation.isVector,
            "minzoom": zooms.lowerBound,
            "maxzoom": zooms.upperBound,
            "bounds": [box.west, box.south, box.east, box.north],
            "center": [center.longitude, center.latitude, center.zoom] as [Any],
            // Whether the archive says at which zoom to open (metadata `center` with a zoom);
            // else the page fits the archive's bounds in the window.
            "centerHasZoom": (try? generation.metadata.center)?.zoom != nil,
            "tileCount": generation.tileCount,
            "attribution": generation.metadata.attribution ?? "",
        ]
    }

    /// The preview's script, after `const archive = {...}`: the map, its view (from the URL's
    /// hash, the metadata's center or the bounds), the raster layer or the vector tile grid, and
    /// the info box.
    private static let previewScript = """
        const [west, south, east, north] = archive.bounds;
        const bounds = L.latLngBounds([south, west], [north, east]);
        const map = L.map("map", {minZoom: 0, maxZoom: Math.min(archive.maxzoom + 4, 30)});
        function viewFromHash() {
          const parts = location.hash.slice(1).split("/").map(Number);
          if (parts.length !== 3 || !parts.every(Number.isFinite)) return false;
          map.setView([parts[1], parts[2]], parts[0], {animate: false});
          return true;
        }
        // Opens where the archive says (its metadata's center and zoom), else with its bounds
        // filling the window, within its zooms (a city-sized archive is not a patch at zoom 0).
        function initialView() {
          if (archive.centerHasZoom) return map.setView([archive.center[1], archive.center[0]], archive.center[2], {animate: false});
          const zoom = Math.min(Math.max(map.getBoundsZoom(bounds), archive.minzoom), archive.maxzoom);
          map.setView(bounds.getCenter(), zoom, {animate: false});
        }
        if (!viewFromHash()) initialView();
        window.addEventListener("hashchange", viewFromHash);
        map.on("moveend", () => {
          const c = map.getCenter();
          history.replaceState(null, "", "#" + map.getZoom() + "/" + c.lat.toFixed(5) + "/" + c.lng.toFixed(5));
        });
        const layerOptions = {minNativeZoom: archive.minzoom, maxNativeZoom: archive.maxzoom, bounds: bounds, noWrap: true};
        function tileURL(coords) {
          return archive.tiles.replace("{z}", coords.z).replace("{x}", coords.x).replace("{y}", coords.y);
        }
        if (!archive.vector) {
          L.tileLayer(archive.tiles, layerOptions).addTo(map);
        } else {
          const Grid = L.GridLayer.extend({
            createTile(coords, done) {
              const tile = document.createElement("div");
              tile.className = "tp-grid";
              const label = document.createElement("div");
              label.textContent = coords.z + "/" + coords.x + "/" + coords.y;
              const size = document.createElement("div");
              size.textContent = "…";
              tile.append(label, size);
              fetch(tileURL(coords), {method: "HEAD"}).then((response) => {
                if (response.status === 200) {
                  const bytes = Number(response.headers.get("content-length"));
                  size.textContent = bytes >= 1024 ? (bytes / 1024).toFixed(1) + " KiB" : bytes + " B";
                  const heat = Math.min(1, bytes / 65536);
                  tile.style.background = "rgba(255," + Math.round(220 - 180 * heat) + ",0,0.35)";
                } else {
                  size.textContent = response.status === 204 ? "no tile" : "outside (" + response.status + ")";
                }
              }).catch(() => { size.textContent = "failed"; }).finally(() => done(null, tile));
              return tile;
            }
          });
          new Grid(layerOptions).addTo(map);
        }
        const Info = L.Control.extend({
          onAdd() {
            const box = L.DomUtil.create("div", "tp-info");
            const title = document.createElement("strong");
            title.textContent = archive.name;
            const facts = document.createElement("div");
            facts.textContent = archive.content + " · zooms " + archive.minzoom + "-" + archive.maxzoom + " · " + archive.tileCount + " tiles";
            const links = document.createElement("div");
            const json = document.createElement("a");
            json.href = archive.tilejson;
            json.textContent = "TileJSON";
            const index = document.createElement("a");
            index.href = archive.index;
            index.textContent = "all archives";
            links.append(json, " · ", index);
            box.append(title, facts, links);
            if (archive.attribution) {
              const attribution = document.createElement("div");
              attribution.textContent = archive.attribution;
              box.append(attribution);
            }
            L.DomEvent.disableClickPropagation(box);
            return box;
          }
        });
        new Info({position: "bottomleft"}).addTo(map);
        """
}
