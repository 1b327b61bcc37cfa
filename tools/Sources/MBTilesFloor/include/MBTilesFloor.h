// The plain C floor for bench-mbtiles: what an MBTiles reader and writer cost with nothing but
// one prepared statement and a sqlite3_step loop.
#ifndef MBTILES_FLOOR_H
#define MBTILES_FLOOR_H
#include <stdint.h>

typedef struct mbtiles_floor_reader mbtiles_floor_reader;

/// Opens `uri` (a file: URI) read-only with SQLITE_OPEN_NOMUTEX, sets PRAGMA mmap_size when
/// `mmap_size` > 0, and prepares the point lookup.
mbtiles_floor_reader *mbtiles_floor_reader_open(const char *uri, int64_t mmap_size);
/// Reads n tiles (XYZ; the TMS flip is done inline) and returns a checksum of their bytes
/// (sum of length + first byte), -1 on error; a missing tile adds nothing.
int64_t mbtiles_floor_reader_run(mbtiles_floor_reader *reader, const int32_t *z, const int32_t *x, const int32_t *y, int64_t n);
void mbtiles_floor_reader_close(mbtiles_floor_reader *reader);

/// Creates a flat MBTiles file at `path` with the same pragmas, schema and statement as
/// tilepack's writer, inserting n tiles in transactions of `per_transaction` rows. Returns 0 on success.
int mbtiles_floor_bulk_insert(const char *path, const int32_t *z, const int32_t *x, const int32_t *y,
                              const uint8_t *const *data, const int32_t *length, int64_t n, int64_t per_transaction);

/// bench-plan's floor: opens `uri` read-only and steps `SELECT length(tile_data) FROM tiles WHERE
/// zoom_level = ? AND tile_column BETWEEN ? AND ? AND tile_row BETWEEN ? AND ?` once per rectangle
/// (columns x0...x1, TMS rows r0...r1). Returns the sum of the lengths (-1 on error) and stores the
/// number of rows in `*rows`.
int64_t mbtiles_floor_sum_lengths(const char *uri, const int32_t *zoom, const int32_t *x0, const int32_t *x1, const int32_t *r0,
                                  const int32_t *r1, int64_t n, int64_t *rows);

/// The same over exact columns: `tile_column = x[i] AND tile_row BETWEEN r0[i] AND r1[i]` (one
/// seek a column, only the area's rows), reading `tile_row, length(tile_data)` when `read_rows`
/// (what a plan must read) or the length alone.
int64_t mbtiles_floor_sum_column_lengths(const char *uri, const int32_t *zoom, const int32_t *x, const int32_t *r0, const int32_t *r1,
                                         int64_t n, int read_rows, int64_t *rows);

/// A counter of this thread's user-space instructions (perf_event_open), or -1 where there is none.
int floor_instruction_counter_open(void);
/// The counter's value, or -1.
int64_t floor_instruction_counter_read(int fd);

#endif
