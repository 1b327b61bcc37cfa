#ifndef TILEPACK_BENCH_FLOORS_H
#define TILEPACK_BENCH_FLOORS_H
#include <stddef.h>

/// The plain C libpng floor: decodes PNG number start, start + step, ... (modulo count) until
/// `total` have been decoded, each into `out` as 8-bit RGBA through libpng's png_image API, the
/// API tilepack uses. `out` holds `out_length` bytes. Returns how many decoded, or -1 on an error.
long tilepack_floor_png_decode(const unsigned char *const *pngs, const size_t *lengths, long count,
                               long start, long step, long total, unsigned char *out, size_t out_length);

/// The memcpy floor: copies `length` bytes from source start, start + step, ... (modulo count)
/// into `out`, `total` times. Returns a byte of `out` so the copies cannot be optimised away.
int tilepack_floor_memcpy(unsigned char *const *sources, long count, long start, long step, long total,
                          unsigned char *out, size_t length);

#endif
