// Runs libFuzzer's driver with tilepack's decode callback when built for fuzzing
// (tools/fuzz-decode.sh: -sanitize=fuzzer and -DTILEPACK_FUZZING); returns -1 otherwise.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef int (*tilepack_fuzz_callback)(const uint8_t *data, size_t size);
int tilepack_fuzz_run_libfuzzer(int *argc, char ***argv, tilepack_fuzz_callback callback);
