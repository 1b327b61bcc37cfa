extension PMTilesWriter {
    /// Where contents copied from ``copySource`` lie there -> the content holding those bytes: the
    /// offsets that come ascending (as a clustered base's contents come, each new one after the
    /// last) in an array searched by halves, any other in a dictionary.
    struct CopiedContents {
        private var ascending: [(offset: Int, content: UInt32)] = []
        private var others: [Int: UInt32] = [:]

        mutating func reserveCapacity(_ count: Int) { ascending.reserveCapacity(count) }

        func content(at offset: Int) -> UInt32? {
            if !others.isEmpty, let content = others[offset] { return content }
            guard let last = ascending.last, offset <= last.offset else { return nil }
            var low = 0, high = ascending.count
            while low < high {
                let middle = (low + high) / 2
                if ascending[middle].offset < offset { low = middle + 1 } else { high = middle }
            }
            return ascending[low].offset == offset ? ascending[low].content : nil
        }

        /// `content` holds the bytes at `offset` (in place of any content said to before).
        mutating func insert(_ content: UInt32, at offset: Int) {
            if ascending.last.map({ offset > $0.offset }) ?? true {
                ascending.append((offset, content))
            } else {
                others[offset] = content
            }
        }
    }
}
