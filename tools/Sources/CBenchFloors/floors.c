#include "bench_floors.h"
#include <png.h>
#include <string.h>

long tilepack_floor_png_decode(const unsigned char *const *pngs, const size_t *lengths, long count,
                               long start, long step, long total, unsigned char *out, size_t out_length) {
    long index = start % count;
    for (long done = 0; done < total; done++) {
        png_image image;
        memset(&image, 0, sizeof image);
        image.version = PNG_IMAGE_VERSION;
        if (!png_image_begin_read_from_memory(&image, pngs[index], lengths[index])) return -1;
        image.format = PNG_FORMAT_RGBA;
        if (PNG_IMAGE_SIZE(image) > out_length) { png_image_free(&image); return -1; }
        if (!png_image_finish_read(&image, NULL, out, 0, NULL)) { png_image_free(&image); return -1; }
        png_image_free(&image);
        index = (index + step) % count;
    }
    return total;
}

int tilepack_floor_memcpy(unsigned char *const *sources, long count, long start, long step, long total,
                          unsigned char *out, size_t length) {
    long index = start % count;
    int sink = 0;
    for (long done = 0; done < total; done++) {
        memcpy(out, sources[index], length);
        sink ^= out[done % length];
        index = (index + step) % count;
    }
    return sink;
}
