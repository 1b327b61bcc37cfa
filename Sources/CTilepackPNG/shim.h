#include <png.h>

// Composite macros Swift cannot import, re-exported as constants and inline functions.
static const png_uint_32 CTILEPACK_PNG_FORMAT_GRAY = PNG_FORMAT_GRAY;
static const png_uint_32 CTILEPACK_PNG_FORMAT_GA = PNG_FORMAT_GA;
static const png_uint_32 CTILEPACK_PNG_FORMAT_RGB = PNG_FORMAT_RGB;
static const png_uint_32 CTILEPACK_PNG_FORMAT_BGR = PNG_FORMAT_BGR;
static const png_uint_32 CTILEPACK_PNG_FORMAT_RGBA = PNG_FORMAT_RGBA;
static const png_uint_32 CTILEPACK_PNG_FORMAT_BGRA = PNG_FORMAT_BGRA;
static const png_uint_32 CTILEPACK_PNG_FORMAT_ARGB = PNG_FORMAT_ARGB;
static const png_uint_32 CTILEPACK_PNG_FORMAT_ABGR = PNG_FORMAT_ABGR;
static const png_uint_32 CTILEPACK_PNG_IMAGE_VERSION = PNG_IMAGE_VERSION;

static inline int ctilepack_png_image_failed(const png_image *image) {
    return PNG_IMAGE_FAILED(*image);
}
