// png-decode-loop: the floor of `verify` for PNG tiles. Walks a tile tree (root/z/x/y.png, three
// levels) on one thread and, for every file, reads it and decodes it completely to RGBA with
// libpng's simplified API (png_image), into one reused pixel buffer. Prints
// "<tiles> tiles <failures> failures".
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char *file_buffer, *pixels;
static size_t file_capacity, pixel_capacity;
static long long tiles, failures;

static void fail(const char *what, const char *path) {
    fprintf(stderr, "png-decode-loop: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
}

static void decode(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("open", path);
    struct stat info;
    if (fstat(fd, &info) != 0) fail("fstat", path);
    size_t size = (size_t)info.st_size;
    if (size > file_capacity) {
        file_capacity = size * 2;
        file_buffer = realloc(file_buffer, file_capacity);
        if (!file_buffer) fail("realloc", path);
    }
    size_t done = 0;
    while (done < size) {
        ssize_t n = read(fd, file_buffer + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("read", path);
        if (n == 0) break;
        done += (size_t)n;
    }
    close(fd);

    png_image image;
    memset(&image, 0, sizeof image);
    image.version = PNG_IMAGE_VERSION;
    tiles++;
    if (!png_image_begin_read_from_memory(&image, file_buffer, done)) {
        failures++;
        return;
    }
    image.format = PNG_FORMAT_RGBA;
    size_t needed = PNG_IMAGE_SIZE(image);
    if (needed > pixel_capacity) {
        pixel_capacity = needed;
        pixels = realloc(pixels, pixel_capacity);
        if (!pixels) fail("realloc", path);
    }
    if (!png_image_finish_read(&image, NULL, pixels, 0, NULL)) failures++;
    png_image_free(&image);
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
        } else {
            decode(child);
        }
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: png-decode-loop TREE\n");
        return 2;
    }
    visit(argv[1], 0);
    printf("%lld tiles %lld failures\n", tiles, failures);
    return failures == 0 ? 0 : 1;
}
