// Plain C loops used as floors by bench-imaging and bench-adapter: what a C program calling libpng,
// libjpeg-turbo and libwebp directly would do, measured in the same run as tilepack.
#pragma once
#include <stddef.h>
#include <stdint.h>

/// libpng's classic API (png_read_row via png_read_image, setjmp error handling), expanded to
/// 8-bit RGBA. Returns 0 on success; width/height receive the size.
int floor_png_classic_rgba(const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height);

/// libpng's simplified API (png_image) decoding to RGBA, called from C.
int floor_png_image_rgba(const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height);

/// A TurboJPEG decompressor reused across calls, as a plain decode loop would.
void *floor_tj_create(void);
void floor_tj_destroy(void *handle);
int floor_tj_rgba(void *handle, const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height);

/// Compresses RGBA pixels to a JPEG (quality 85, 4:2:0) for the benchmark's generated tile set.
/// Returns the size, writing into out (out_capacity bytes); 0 on failure.
size_t floor_tj_encode_rgba(const uint8_t *rgba, int width, int height, uint8_t *out, size_t out_capacity);

/// libwebp's WebPDecodeRGBAInto.
int floor_webp_rgba(const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height);

/// The plain C libpng floor: decodes PNG number start, start + step, ... (modulo count) until
/// `total` have been decoded, each into `out` as 8-bit RGBA through libpng's png_image API, the
/// API tilepack uses. `out` holds `out_length` bytes. Returns how many decoded, or -1 on an error.
long tilepack_floor_png_decode(const unsigned char *const *pngs, const size_t *lengths, long count,
                               long start, long step, long total, unsigned char *out, size_t out_length);

/// The memcpy floor: copies `length` bytes from source start, start + step, ... (modulo count)
/// into `out`, `total` times. Returns a byte of `out` so the copies cannot be optimised away.
int tilepack_floor_memcpy(unsigned char *const *sources, long count, long start, long step, long total,
                          unsigned char *out, size_t length);

