// floor-read: the floors of tile import and verify. Walks a tile tree (root/z/x/y.ext, three
// levels) on one thread and, for every file, does the least a plain C program would:
//
//   floor-read TREE            open and read every file once into one reused buffer (import's
//                              read floor); prints "<files> files <bytes> bytes"
//   floor-read --write OUT TREE
//                              also write each file's bytes, as read, to the one file OUT (created
//                              or truncated), then fsync OUT: `cat` of every file into one file,
//                              then sync (import's read+write floor); prints as the read floor
//   floor-read --decode TREE   also decode it completely to RGBA into one reused pixel buffer
//                              (verify's floor): PNG with libpng's simplified API (png_image),
//                              JPEG with TurboJPEG (tjDecompress2); prints
//                              "<files> files <bytes> bytes <failures> failures"
//   floor-read --evict TREE    instead drop every file's pages from the page cache
//                              (posix_fadvise DONTNEED), for cold-cache runs that leave the rest
//                              of a shared machine's cache alone
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

enum mode { READ, WRITE, DECODE, EVICT };

static enum mode mode = READ;
static unsigned char *buffer, *pixels;
static size_t capacity, pixel_capacity;
static long long files, bytes, failures;
static int output = -1;
static tjhandle jpeg;

static void fail(const char *what, const char *path) {
    fprintf(stderr, "floor-read: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

/// Reads the whole open file into `buffer`; returns the bytes read.
static size_t read_all(int fd, const char *path) {
    struct stat info;
    if (fstat(fd, &info) != 0) fail("fstat", path);
    size_t size = (size_t)info.st_size;
    if (size > capacity) {
        capacity = size * 2;
        buffer = realloc(buffer, capacity);
        if (!buffer) fail("realloc", path);
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, buffer + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("read", path);
        if (n == 0) break;
        done += (size_t)n;
    }
    return done;
}

/// Writes `size` bytes of `buffer` to the output.
static void write_all(size_t size, const char *path) {
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(output, buffer + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("write", path);
        done += (size_t)n;
    }
}

static unsigned char *pixel_buffer(size_t needed, const char *path) {
    if (needed > pixel_capacity) {
        pixel_capacity = needed;
        pixels = realloc(pixels, pixel_capacity);
        if (!pixels) fail("realloc", path);
    }
    return pixels;
}

static void decode_png(size_t size, const char *path) {
    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&image, buffer, size)) {
        failures++;
        return;
    }
    image.format = PNG_FORMAT_RGBA;
    if (!png_image_finish_read(&image, NULL, pixel_buffer(PNG_IMAGE_SIZE(image), path), 0, NULL)) failures++;
    png_image_free(&image);
}

static void decode_jpeg(size_t size, const char *path) {
    if (!jpeg && !(jpeg = tjInitDecompress())) fail("tjInitDecompress", path);
    int width, height, subsampling, colorspace;
    if (tjDecompressHeader3(jpeg, buffer, (unsigned long)size, &width, &height, &subsampling, &colorspace) != 0) {
        failures++;
        return;
    }
    unsigned char *out = pixel_buffer((size_t)width * (size_t)height * 4, path);
    if (tjDecompress2(jpeg, buffer, (unsigned long)size, out, width, width * 4, height, TJPF_RGBA, 0) != 0) failures++;
}

static void decode(size_t size, const char *path) {
    if (size >= 3 && buffer[0] == 0xFF && buffer[1] == 0xD8 && buffer[2] == 0xFF) decode_jpeg(size, path);
    else decode_png(size, path);
}

static void visit(const char *path, int level) {
    DIR *dir = opendir(path);
    if (!dir) fail("opendir", path);
    struct dirent *entry;
    char child[4096];
    while ((entry = readdir(dir))) {
        if (entry->d_name[0] == '.') continue;
        snprintf(child, sizeof child, "%s/%s", path, entry->d_name);
        if (level < 2) {
            if (entry->d_type == DT_DIR) visit(child, level + 1);
            continue;
        }
        int fd = open(child, O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail("open", child);
        if (mode == EVICT) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        } else {
            size_t size = read_all(fd, child);
            bytes += (long long)size;
            if (mode == DECODE) decode(size, child);
            if (mode == WRITE) write_all(size, child);
        }
        close(fd);
        files++;
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    const char *root = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--evict") == 0) mode = EVICT;
        else if (strcmp(argv[i], "--decode") == 0) mode = DECODE;
        else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) { mode = WRITE; out = argv[++i]; }
        else root = argv[i];
    }
    if (!root) {
        fprintf(stderr, "usage: floor-read [--decode | --evict | --write OUT] TREE\n");
        return 2;
    }
    if (mode == WRITE) {
        output = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (output < 0) fail("create", out);
    }
    visit(root, 0);
    if (mode == WRITE) {
        if (fsync(output) != 0) fail("fsync", out);
        close(output);
    }
    if (mode == DECODE) {
        printf("%lld files %lld bytes %lld failures\n", files, bytes, failures);
        return failures == 0 ? 0 : 1;
    }
    printf("%lld files %lld bytes\n", files, bytes);
    return 0;
}
