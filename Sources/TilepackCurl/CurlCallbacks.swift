#if canImport(CTilepackCurl)
internal import CTilepackCurl
import Foundation
import TilepackHTTP

// The callbacks curl calls with a transfer's bytes, on the loop's thread (``CurlLoop``); their
// context is the ``CurlTransfer``.

/// curl's write callback: a piece of the body, into the transfer's response (bounded there).
/// Returning less than given stops the transfer.
let curlWrite: tilepack_curl_data_callback = { data, size, count, context in
    guard let context else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard transfer.deliverHead(), transfer.response.receiveBody(UnsafeRawBufferPointer(start: data, count: length)) else { return 0 }
    return length
}

/// curl's read callback: the next bytes of the request's body, copied into curl's send buffer.
let curlRead: tilepack_curl_data_callback = { buffer, size, count, context in
    guard let context, let buffer else { return Int(CURL_READFUNC_ABORT) }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    guard let body = transfer.request.body else { return 0 }
    let offset = transfer.bodyOffset
    let length = min(size * count, body.count - offset)
    guard length > 0 else { return 0 }
    body.withUnsafeBytes { bytes in
        UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + offset, byteCount: length)
    }
    transfer.bodyOffset = offset + length
    return length
}

/// curl's seek callback: the body read again from `offset` (a request curl sends again).
let curlSeek: tilepack_curl_seek_callback = { context, offset, origin in
    guard let context, origin == SEEK_SET else { return CURL_SEEKFUNC_CANTSEEK }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    guard let body = transfer.request.body, offset >= 0, offset <= body.count else { return CURL_SEEKFUNC_FAIL }
    transfer.bodyOffset = Int(offset)
    return CURL_SEEKFUNC_OK
}

/// curl's header callback: one header line; a status line starts a new response (after a
/// `100 Continue`, say), so the fields gathered so far are dropped. Names are lower-cased byte
/// by byte while copied (one string each, none on the heap up to 15 bytes).
let curlHeader: tilepack_curl_data_callback = { data, size, count, context in
    let length = size * count
    guard let context, let data else { return length }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
    let line = UnsafeRawBufferPointer(start: data, count: length)
    if length >= 5, line[0] == 0x48, line[1] == 0x54, line[2] == 0x54, line[3] == 0x50, line[4] == 0x2F {  // "HTTP/"
        transfer.fields = HTTPFields()
        return length
    }
    guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return length }
    if transfer.fields.count == 0 { transfer.fields.reserveCapacity(12) }
    transfer.fields.append(lowercasedName: text(line[..<colon], lowercased: true), value: text(line[(colon + 1)...], lowercased: false))
    return length
}

/// The bytes as text without the blanks and line end around them; ASCII capitals lower-cased
/// with `lowercased`.
private func text(_ bytes: Slice<UnsafeRawBufferPointer>, lowercased: Bool) -> String {
    let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
    var first = bytes.startIndex, end = bytes.endIndex
    while first < end, blank(bytes[first]) { first += 1 }
    while end > first, blank(bytes[end - 1]) { end -= 1 }
    let trimmed = UnsafeRawBufferPointer(rebasing: bytes[first..<end])
    guard lowercased, trimmed.contains(where: { $0 >= 65 && $0 <= 90 }) else { return String(decoding: trimmed, as: UTF8.self) }
    return String(unsafeUninitializedCapacity: trimmed.count) { buffer in
        for (index, byte) in trimmed.enumerated() { buffer[index] = byte >= 65 && byte <= 90 ? byte | 0x20 : byte }
        return trimmed.count
    }
}
#endif
