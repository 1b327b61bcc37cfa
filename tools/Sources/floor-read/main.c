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
//   floor-read --sqlite OUT TREE
//                              also insert each file into the `tiles` table of a new MBTiles
//                              file OUT, with the pragmas, page size, index and commits of
//                              tilepack's MBTiles writer, then fsync OUT (what an import into
//                              MBTiles cannot do without: the reads and one SQLite writer)
//
//   floor-read --write OUT --lz4 TREE
//                              as --write, each file first compressed with LZ4 (the bundle's
//                              codec: LZ4_compress_default) and written compressed when that is
//                              smaller, else as it is (what an import into a bundle cannot do
//                              without)
//
//   --threads N (N > 1, with the read, --write and --sqlite modes): the same work on N threads
//   taking the tree's z/x folders in turn, each file opened relative to its folder and read with
//   no fstat (the least a reader can do per file, and what tilepack does): what N cores could do
//   at best. --write then writes each thread's bytes in 1 MiB pieces at offsets the threads take in
//   turn. --sqlite always reads on N threads (default 1) and inserts on the main thread what they
//   hand it, a folder's files at a time (SQLite has one writer). Files are counted the same; the
//   order of the bytes differs.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lz4.h>
#include <png.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

enum mode { READ, WRITE, DECODE, EVICT, SQLITE };

static enum mode mode = READ;
static int lz4;
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

/// With --lz4: `data` compressed into `*scratch` (grown as needed) when that is smaller; returns
/// the bytes to write and sets `*size` to their count.
static const unsigned char *compressed(const unsigned char *data, size_t *size, unsigned char **scratch, size_t *room, const char *path) {
    if (!lz4 || *size > LZ4_MAX_INPUT_SIZE) return data;
    size_t bound = (size_t)LZ4_compressBound((int)*size);
    if (bound > *room) {
        *room = bound * 2;
        *scratch = realloc(*scratch, *room);
        if (!*scratch) fail("realloc", path);
    }
    int packed = LZ4_compress_default((const char *)data, (char *)*scratch, (int)*size, (int)bound);
    if (packed <= 0 || (size_t)packed >= *size) return data;
    *size = (size_t)packed;
    return *scratch;
}

static unsigned char *packed_buffer;
static size_t packed_capacity;

/// Writes `size` bytes of `buffer` (compressed first with --lz4) to the output.
static void write_all(size_t size, const char *path) {
    const unsigned char *data = compressed(buffer, &size, &packed_buffer, &packed_capacity, path);
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(output, data + done, size - done);
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

// MARK: --sqlite and --threads

static sqlite3 *db;
static sqlite3_stmt *insert;
static long long inserted;

static void sqlite_fail(const char *what) {
    fprintf(stderr, "floor-read: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    exit(1);
}

static void sqlite_exec(const char *sql) {
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) sqlite_fail(sql);
}

/// A new MBTiles file as tilepack's MBTilesWriter starts it (flat schema, its pragmas).
static void sqlite_open(const char *path) {
    unlink(path);
    if (sqlite3_open(path, &db) != SQLITE_OK) sqlite_fail("open");
    sqlite_exec("PRAGMA page_size = 8192; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                "PRAGMA locking_mode = EXCLUSIVE; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16384;"
                "CREATE TABLE metadata (name TEXT NOT NULL, value TEXT); CREATE UNIQUE INDEX name ON metadata (name);"
                "CREATE TABLE tiles (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_data BLOB);"
                "CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row); BEGIN");
    if (sqlite3_prepare_v2(db, "INSERT INTO tiles VALUES (?1, ?2, ?3, ?4)", -1, &insert, NULL) != SQLITE_OK) sqlite_fail("prepare");
}

/// One tile into the table, rows counted from the south (MBTiles' TMS rows); a commit every 10,000.
static void sqlite_insert(int z, int x, int y, const unsigned char *data, size_t size) {
    sqlite3_bind_int(insert, 1, z);
    sqlite3_bind_int(insert, 2, x);
    sqlite3_bind_int(insert, 3, (1 << z) - 1 - y);
    sqlite3_bind_blob(insert, 4, data, (int)size, SQLITE_STATIC);
    if (sqlite3_step(insert) != SQLITE_DONE) sqlite_fail("insert");
    sqlite3_reset(insert);
    if (++inserted % 10000 == 0) sqlite_exec("COMMIT; BEGIN");
}

static void sqlite_close(const char *path) {
    sqlite3_finalize(insert);
    sqlite_exec("COMMIT");
    if (sqlite3_close(db) != SQLITE_OK) sqlite_fail("close");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) fail("fsync", path);
    close(fd);
}

/// The z/x folders of the tree, with their zoom and column.
struct folder { char *path; int z, x; };
static struct folder *folders;
static int folder_count;
static atomic_int next_folder;
static atomic_llong write_offset;

/// Writes `size` bytes at the next free offset of the output, which the threads take in turn.
static void write_next(const unsigned char *data, size_t size, const char *path) {
    long long at = atomic_fetch_add(&write_offset, (long long)size);
    if (pwrite(output, data, size, at) != (ssize_t)size) fail("pwrite", path);
}

static void list_folders(const char *root) {
    int room = 0;
    DIR *top = opendir(root);
    if (!top) fail("opendir", root);
    struct dirent *zoom;
    while ((zoom = readdir(top))) {
        if (zoom->d_name[0] == '.' || (zoom->d_type != DT_DIR && zoom->d_type != DT_UNKNOWN)) continue;
        char zpath[4096];
        snprintf(zpath, sizeof zpath, "%s/%s", root, zoom->d_name);
        DIR *columns = opendir(zpath);
        if (!columns) fail("opendir", zpath);
        struct dirent *column;
        while ((column = readdir(columns))) {
            if (column->d_name[0] == '.' || (column->d_type != DT_DIR && column->d_type != DT_UNKNOWN)) continue;
            if (folder_count == room) {
                room = room ? room * 2 : 1024;
                folders = realloc(folders, sizeof *folders * (size_t)room);
                if (!folders) fail("realloc", root);
            }
            size_t length = strlen(zpath) + strlen(column->d_name) + 2;
            char *path = malloc(length);
            if (!path) fail("malloc", root);
            snprintf(path, length, "%s/%s", zpath, column->d_name);
            folders[folder_count++] = (struct folder){ path, atoi(zoom->d_name), atoi(column->d_name) };
        }
        closedir(columns);
    }
    closedir(top);
}

/// Files read by a reading thread and not yet inserted: one folder's worth at most.
struct batch {
    struct batch *next;
    int z, x, count, capacity;
    int *rows, *order;
    size_t *ends;
    unsigned char *bytes;
    size_t used, room;
};
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_changed = PTHREAD_COND_INITIALIZER;
static struct batch *queue_head, *queue_tail;
static int queued, readers_left;

static void batch_add(struct batch *batch, int y, const unsigned char *data, size_t size, const char *path) {
    if (batch->count == batch->capacity) {
        batch->capacity = batch->capacity ? batch->capacity * 2 : 256;
        batch->rows = realloc(batch->rows, sizeof(int) * (size_t)batch->capacity);
        batch->ends = realloc(batch->ends, sizeof(size_t) * (size_t)batch->capacity);
        if (!batch->rows || !batch->ends) fail("realloc", path);
    }
    if (batch->used + size > batch->room) {
        batch->room = (batch->used + size) * 2;
        batch->bytes = realloc(batch->bytes, batch->room);
        if (!batch->bytes) fail("realloc", path);
    }
    memcpy(batch->bytes + batch->used, data, size);
    batch->used += size;
    batch->rows[batch->count] = y;
    batch->ends[batch->count++] = batch->used;
}

static int by_row_descending(const void *a, const void *b, void *context) {
    const int *rows = context;
    int left = rows[*(const int *)a], right = rows[*(const int *)b];
    return (left < right) - (left > right);
}

/// Hands a batch to the inserting thread, waiting while 64 are queued (memory stays bounded). Its
/// files go in the order of their TMS rows, the index's order (as tilepack's walker sorts them).
static void batch_send(struct batch *batch) {
    batch->order = malloc(sizeof(int) * (size_t)(batch->count ? batch->count : 1));
    if (!batch->order) fail("malloc", "batch");
    for (int i = 0; i < batch->count; i++) batch->order[i] = i;
    qsort_r(batch->order, (size_t)batch->count, sizeof(int), by_row_descending, batch->rows);
    pthread_mutex_lock(&queue_lock);
    while (queued >= 64) pthread_cond_wait(&queue_changed, &queue_lock);
    if (queue_tail) queue_tail->next = batch; else queue_head = batch;
    queue_tail = batch;
    queued++;
    pthread_cond_broadcast(&queue_changed);
    pthread_mutex_unlock(&queue_lock);
}

static void *read_folders(void *unused) {
    (void)unused;
    size_t room = 1 << 18;
    unsigned char *own = malloc(room), *pending = malloc(1 << 20);
    size_t pending_used = 0, packed_room = 0;
    unsigned char *packed = NULL;
    long long my_files = 0, my_bytes = 0;
    if (!own || !pending) fail("malloc", "buffer");
    char child[4096];
    for (;;) {
        int index = atomic_fetch_add(&next_folder, 1);
        if (index >= folder_count) break;
        struct folder *folder = &folders[index];
        struct batch *batch = mode == SQLITE ? calloc(1, sizeof *batch) : NULL;
        if (mode == SQLITE && !batch) fail("calloc", folder->path);
        if (batch) { batch->z = folder->z; batch->x = folder->x; }
        int folder_fd = open(folder->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *dir = folder_fd < 0 ? NULL : fdopendir(folder_fd);
        if (!dir) fail("opendir", folder->path);
        struct dirent *entry;
        while ((entry = readdir(dir))) {
            if (entry->d_name[0] == '.') continue;
            snprintf(child, sizeof child, "%s/%s", folder->path, entry->d_name);
            // The least per file: opened relative to its folder, read with no fstat until a short
            // read (the end of a regular file), as tilepack's reader does.
            int fd = openat(folder_fd, entry->d_name, O_RDONLY | O_CLOEXEC);
            if (fd < 0) fail("open", child);
            size_t done = 0;
            for (;;) {
                if (done == room) {
                    room *= 2;
                    own = realloc(own, room);
                    if (!own) fail("realloc", child);
                }
                size_t want = room - done;
                ssize_t n = read(fd, own + done, want);
                if (n < 0 && errno == EINTR) continue;
                if (n < 0) fail("read", child);
                done += (size_t)n;
                if ((size_t)n < want) break;
            }
            close(fd);
            my_files++;
            my_bytes += (long long)done;
            if (mode == SQLITE) batch_add(batch, atoi(entry->d_name), own, done, child);
            if (mode == WRITE) {
                const unsigned char *data = compressed(own, &done, &packed, &packed_room, child);
                if (pending_used + done > (1 << 20) && pending_used > 0) {
                    write_next(pending, pending_used, "output");
                    pending_used = 0;
                }
                if (done > (1 << 20)) {
                    write_next(data, done, child);
                } else {
                    memcpy(pending + pending_used, data, done);
                    pending_used += done;
                }
            }
        }
        closedir(dir);
        if (batch) batch_send(batch);
    }
    if (pending_used > 0) write_next(pending, pending_used, "output");
    free(own);
    free(pending);
    free(packed);
    pthread_mutex_lock(&queue_lock);
    files += my_files;
    bytes += my_bytes;
    readers_left--;
    pthread_cond_broadcast(&queue_changed);
    pthread_mutex_unlock(&queue_lock);
    return NULL;
}

/// The inserting thread's loop: every batch the readers hand over, until they are all done.
static void insert_batches(void) {
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (!queue_head && readers_left > 0) pthread_cond_wait(&queue_changed, &queue_lock);
        struct batch *batch = queue_head;
        if (batch) {
            queue_head = batch->next;
            if (!queue_head) queue_tail = NULL;
            queued--;
            pthread_cond_broadcast(&queue_changed);
        }
        pthread_mutex_unlock(&queue_lock);
        if (!batch) return;
        for (int i = 0; i < batch->count; i++) {
            int file = batch->order[i];
            size_t start = file == 0 ? 0 : batch->ends[file - 1];
            sqlite_insert(batch->z, batch->x, batch->rows[file], batch->bytes + start, batch->ends[file] - start);
        }
        free(batch->order);
        free(batch->rows);
        free(batch->ends);
        free(batch->bytes);
        free(batch);
    }
}

static void visit_threaded(const char *root, int threads) {
    list_folders(root);
    readers_left = threads;
    pthread_t ids[64];
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&ids[i], NULL, read_folders, NULL) != 0) fail("pthread_create", root);
    }
    if (mode == SQLITE) insert_batches();
    for (int i = 0; i < threads; i++) pthread_join(ids[i], NULL);
}

int main(int argc, char **argv) {
    const char *root = NULL, *out = NULL;
    int threads = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--evict") == 0) mode = EVICT;
        else if (strcmp(argv[i], "--decode") == 0) mode = DECODE;
        else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc) { mode = WRITE; out = argv[++i]; }
        else if (strcmp(argv[i], "--lz4") == 0) lz4 = 1;
        else if (strcmp(argv[i], "--sqlite") == 0 && i + 1 < argc) { mode = SQLITE; out = argv[++i]; }
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else root = argv[i];
    }
    if (!root) {
        fprintf(stderr, "usage: floor-read [--decode | --evict | --write OUT | --sqlite OUT] [--threads N] TREE\n");
        return 2;
    }
    if (lz4 && mode != WRITE) {
        fprintf(stderr, "floor-read: --lz4 goes with --write\n");
        return 2;
    }
    if (threads < 1 || threads > 64 || (threads > 1 && (mode == DECODE || mode == EVICT))) {
        fprintf(stderr, "floor-read: --threads takes 1 to 64, with the read, --write and --sqlite modes\n");
        return 2;
    }
    if (mode == WRITE) {
        output = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (output < 0) fail("create", out);
    }
    if (mode == SQLITE) sqlite_open(out);
    if (threads > 1 || mode == SQLITE) visit_threaded(root, threads); else visit(root, 0);
    if (mode == SQLITE) sqlite_close(out);
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
