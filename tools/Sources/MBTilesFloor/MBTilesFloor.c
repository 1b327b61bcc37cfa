#include "MBTilesFloor.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

struct mbtiles_floor_reader {
    sqlite3 *db;
    sqlite3_stmt *lookup;
};

mbtiles_floor_reader *mbtiles_floor_reader_open(const char *uri, int64_t mmap_size) {
    mbtiles_floor_reader *reader = calloc(1, sizeof *reader);
    if (!reader) return NULL;
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE;
    if (sqlite3_open_v2(uri, &reader->db, flags, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(reader->db,
                           "SELECT tile_data FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 AND tile_row = ?3 LIMIT 1",
                           -1, SQLITE_PREPARE_PERSISTENT, &reader->lookup, NULL) != SQLITE_OK) {
        fprintf(stderr, "floor open: %s\n", sqlite3_errmsg(reader->db));
        mbtiles_floor_reader_close(reader);
        return NULL;
    }
    if (mmap_size > 0) {
        char pragma[64];
        snprintf(pragma, sizeof pragma, "PRAGMA mmap_size = %lld", (long long)mmap_size);
        sqlite3_exec(reader->db, pragma, NULL, NULL, NULL);
    }
    return reader;
}

int64_t mbtiles_floor_reader_run(mbtiles_floor_reader *reader, const int32_t *z, const int32_t *x, const int32_t *y, int64_t n) {
    int64_t checksum = 0;
    sqlite3_stmt *s = reader->lookup;
    for (int64_t i = 0; i < n; i++) {
        sqlite3_bind_int64(s, 1, z[i]);
        sqlite3_bind_int64(s, 2, x[i]);
        sqlite3_bind_int64(s, 3, ((int64_t)1 << z[i]) - 1 - y[i]);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            const unsigned char *bytes = sqlite3_column_blob(s, 0);
            int length = sqlite3_column_bytes(s, 0);
            checksum += length + (length > 0 ? bytes[0] : 0);
        } else if (rc != SQLITE_DONE) {
            sqlite3_reset(s);
            return -1;
        }
        sqlite3_reset(s);
    }
    return checksum;
}

void mbtiles_floor_reader_close(mbtiles_floor_reader *reader) {
    if (!reader) return;
    sqlite3_finalize(reader->lookup);
    sqlite3_close_v2(reader->db);
    free(reader);
}

static int exec(sqlite3 *db, const char *sql) {
    char *message = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &message) != SQLITE_OK) {
        fprintf(stderr, "floor: %s: %s\n", sql, message ? message : "?");
        sqlite3_free(message);
        return 1;
    }
    return 0;
}

int mbtiles_floor_bulk_insert(const char *path, const int32_t *z, const int32_t *x, const int32_t *y,
                              const uint8_t *const *data, const int32_t *length, int64_t n, int64_t per_transaction) {
    sqlite3 *db = NULL;
    sqlite3_stmt *insert = NULL;
    int failed = 1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) goto done;
    /* The same file settings as MBTilesWriter (page_size 8192, its default). */
    if (exec(db, "PRAGMA page_size = 8192; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                 "PRAGMA locking_mode = EXCLUSIVE; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -65536;"
                 "CREATE TABLE metadata (name TEXT NOT NULL, value TEXT); CREATE UNIQUE INDEX name ON metadata (name);"
                 "CREATE TABLE tiles (zoom_level INTEGER NOT NULL, tile_column INTEGER NOT NULL, tile_row INTEGER NOT NULL, tile_data BLOB);"
                 "CREATE UNIQUE INDEX tile_index ON tiles (zoom_level, tile_column, tile_row);")) goto done;
    if (sqlite3_prepare_v3(db, "INSERT OR REPLACE INTO tiles (zoom_level, tile_column, tile_row, tile_data) VALUES (?1, ?2, ?3, ?4)",
                           -1, SQLITE_PREPARE_PERSISTENT, &insert, NULL) != SQLITE_OK) goto done;
    if (exec(db, "BEGIN")) goto done;
    for (int64_t i = 0; i < n; i++) {
        sqlite3_bind_int64(insert, 1, z[i]);
        sqlite3_bind_int64(insert, 2, x[i]);
        sqlite3_bind_int64(insert, 3, ((int64_t)1 << z[i]) - 1 - y[i]);
        sqlite3_bind_blob(insert, 4, data[i], length[i], SQLITE_STATIC);
        if (sqlite3_step(insert) != SQLITE_DONE) { fprintf(stderr, "floor insert: %s\n", sqlite3_errmsg(db)); goto done; }
        sqlite3_reset(insert);
        if ((i + 1) % per_transaction == 0 && (exec(db, "COMMIT") || exec(db, "BEGIN"))) goto done;
    }
    if (exec(db, "COMMIT")) goto done;
    failed = 0;
done:
    if (failed && db) fprintf(stderr, "floor bulk insert failed: %s\n", sqlite3_errmsg(db));
    sqlite3_finalize(insert);
    sqlite3_close_v2(db);
    return failed;
}

int64_t mbtiles_floor_sum_lengths(const char *uri, const int32_t *zoom, const int32_t *x0, const int32_t *x1, const int32_t *r0,
                                  const int32_t *r1, int64_t n, int64_t *rows) {
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t sum = 0, count = 0;
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE;
    if (sqlite3_open_v2(uri, &db, flags, NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(db,
                           "SELECT length(tile_data) FROM tiles WHERE zoom_level = ?1 AND tile_column BETWEEN ?2 AND ?3 "
                           "AND tile_row BETWEEN ?4 AND ?5",
                           -1, 0, &s, NULL) != SQLITE_OK) {
        fprintf(stderr, "floor open: %s\n", sqlite3_errmsg(db));
        sum = -1;
        goto done;
    }
    for (int64_t i = 0; i < n && sum >= 0; i++) {
        sqlite3_bind_int64(s, 1, zoom[i]);
        sqlite3_bind_int64(s, 2, x0[i]);
        sqlite3_bind_int64(s, 3, x1[i]);
        sqlite3_bind_int64(s, 4, r0[i]);
        sqlite3_bind_int64(s, 5, r1[i]);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            sum += sqlite3_column_int64(s, 0);
            count++;
        }
        if (rc != SQLITE_DONE) sum = -1;
        sqlite3_reset(s);
    }
done:
    sqlite3_finalize(s);
    sqlite3_close_v2(db);
    *rows = count;
    return sum;
}

int64_t mbtiles_floor_sum_column_lengths(const char *uri, const int32_t *zoom, const int32_t *x, const int32_t *r0, const int32_t *r1,
                                         int64_t n, int read_rows, int64_t *rows) {
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t sum = 0, count = 0;
    int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE;
    const char *sql = read_rows ? "SELECT length(tile_data), tile_row FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 "
                                  "AND tile_row BETWEEN ?3 AND ?4"
                                : "SELECT length(tile_data) FROM tiles WHERE zoom_level = ?1 AND tile_column = ?2 "
                                  "AND tile_row BETWEEN ?3 AND ?4";
    if (sqlite3_open_v2(uri, &db, flags, NULL) != SQLITE_OK || sqlite3_prepare_v3(db, sql, -1, 0, &s, NULL) != SQLITE_OK) {
        fprintf(stderr, "floor open: %s\n", sqlite3_errmsg(db));
        sum = -1;
        goto done;
    }
    for (int64_t i = 0; i < n && sum >= 0; i++) {
        sqlite3_bind_int64(s, 1, zoom[i]);
        sqlite3_bind_int64(s, 2, x[i]);
        sqlite3_bind_int64(s, 3, r0[i]);
        sqlite3_bind_int64(s, 4, r1[i]);
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            sum += sqlite3_column_int64(s, 0);
            if (read_rows) sum += sqlite3_column_int64(s, 1);
            count++;
        }
        if (rc != SQLITE_DONE) sum = -1;
        sqlite3_reset(s);
    }
done:
    sqlite3_finalize(s);
    sqlite3_close_v2(db);
    *rows = count;
    return sum;
}

int floor_instruction_counter_open(void) {
#ifdef __linux__
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
#else
    return -1;
#endif
}

int64_t floor_instruction_counter_read(int fd) {
    uint64_t value = 0;
#ifdef __linux__
    if (fd >= 0 && read(fd, &value, sizeof value) == sizeof value) return (int64_t)value;
#endif
    return -1;
}
