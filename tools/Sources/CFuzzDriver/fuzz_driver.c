#include "fuzz_driver.h"

#ifdef TILEPACK_FUZZING
// libFuzzer's entry point for programs with their own main (compiler-rt FuzzerDriver.cpp).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*cb)(const uint8_t *data, size_t size));

int tilepack_fuzz_run_libfuzzer(int *argc, char ***argv, tilepack_fuzz_callback callback) {
    return LLVMFuzzerRunDriver(argc, argv, callback);
}
#else
int tilepack_fuzz_run_libfuzzer(int *argc, char ***argv, tilepack_fuzz_callback callback) {
    (void)argc; (void)argv; (void)callback;
    return -1;
}
#endif
