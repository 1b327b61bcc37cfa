// floor-read: the floor of a tile import. Walks a tile tree (root/z/x/y.ext, three levels) and
// opens and reads every file once, on one thread, into one reused buffer. Nothing else: no
// parsing, no checks, no output file. Prints "<files> files <bytes> bytes".
//
//   floor-read TREE            read every file once
//   floor-read --evict TREE    instead drop every file's pages from the page cache
//                              (posix_fadvise DONTNEED), for cold-cache runs that leave the rest
//                              of a shared machine's cache alone
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static unsigned char *buffer;
static size_t capacity;
static long long files, bytes;
static int evict;

static void fail(const char *what, const char *path) {
    fprintf(stderr, "floor-read: %s %s: %s\n", what, path, strerror(errno));
    exit(1);
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
        if (evict) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        } else {
            struct stat info;
            if (fstat(fd, &info) != 0) fail("fstat", child);
            size_t size = (size_t)info.st_size;
            if (size > capacity) {
                capacity = size * 2;
                buffer = realloc(buffer, capacity);
                if (!buffer) fail("realloc", child);
            }
            size_t done = 0;
            while (done < size) {
                ssize_t n = read(fd, buffer + done, size - done);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) fail("read", child);
                if (n == 0) break;
                done += (size_t)n;
            }
            bytes += (long long)done;
        }
        close(fd);
        files++;
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    const char *root = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--evict") == 0) evict = 1;
        else root = argv[i];
    }
    if (!root) {
        fprintf(stderr, "usage: floor-read [--evict] TREE\n");
        return 2;
    }
    visit(root, 0);
    printf("%lld files %lld bytes\n", files, bytes);
    return 0;
}
