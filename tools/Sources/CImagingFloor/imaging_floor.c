#include "imaging_floor.h"
#include <png.h>
#include <setjmp.h>
#include <string.h>
#include <turbojpeg.h>
#include <webp/decode.h>

typedef struct { const uint8_t *data; size_t size, pos; } reader;

static void read_mem(png_structp png, png_bytep dst, size_t n) {
    reader *r = (reader *)png_get_io_ptr(png);
    if (r->size - r->pos < n) png_error(png, "truncated");
    memcpy(dst, r->data + r->pos, n);
    r->pos += n;
}

int floor_png_classic_rgba(const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height) {
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    if (!png) return -1;
    png_infop info = png_create_info_struct(png);
    png_bytep rows[4096];
    reader r = { data, size, 0 };
    if (!info || setjmp(png_jmpbuf(png))) { png_destroy_read_struct(&png, &info, NULL); return -1; }
    png_set_read_fn(png, &r, read_mem);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (w > 4096 || h > 4096 || (size_t)w * h * 4 != out_size) png_error(png, "size");
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (depth == 16) png_set_strip_16(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_filler(png, 0xFF, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    for (png_uint_32 y = 0; y < h; y++) rows[y] = out + (size_t)y * w * 4;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    *width = (int)w; *height = (int)h;
    return 0;
}

int floor_png_image_rgba(const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, data, size)) return -1;
    if ((size_t)image.width * image.height * 4 != out_size) { png_image_free(&image); return -1; }
    image.format = PNG_FORMAT_RGBA;
    if (!png_image_finish_read(&image, NULL, out, 0, NULL)) return -1;
    *width = (int)image.width; *height = (int)image.height;
    return 0;
}

void *floor_tj_create(void) { return tjInitDecompress(); }
void floor_tj_destroy(void *handle) { tjDestroy(handle); }

int floor_tj_rgba(void *handle, const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height) {
    int w, h, sub, cs;
    if (tjDecompressHeader3(handle, data, (unsigned long)size, &w, &h, &sub, &cs) != 0) return -1;
    if ((size_t)w * h * 4 != out_size) return -1;
    if (tjDecompress2(handle, data, (unsigned long)size, out, w, w * 4, h, TJPF_RGBA, 0) != 0) return -1;
    *width = w; *height = h;
    return 0;
}

size_t floor_tj_encode_rgba(const uint8_t *rgba, int width, int height, uint8_t *out, size_t out_capacity) {
    tjhandle tj = tjInitCompress();
    unsigned char *jpeg = out;
    unsigned long size = (unsigned long)out_capacity;
    int rc = tjCompress2(tj, rgba, width, width * 4, height, TJPF_RGBA, &jpeg, &size, TJSAMP_420, 85, TJFLAG_NOREALLOC);
    tjDestroy(tj);
    return rc == 0 ? (size_t)size : 0;
}

int floor_webp_rgba(const uint8_t *data, size_t size, uint8_t *out, size_t out_size, int *width, int *height) {
    int w, h;
    if (!WebPGetInfo(data, size, &w, &h) || (size_t)w * h * 4 != out_size) return -1;
    if (!WebPDecodeRGBAInto(data, size, out, out_size, w * 4)) return -1;
    *width = w; *height = h;
    return 0;
}

// Loops for bench-adapter: many tiles per call, so call overhead does not count.


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
