// Plain C decode loops used as floors by bench-imaging: what a C program calling libpng,
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
