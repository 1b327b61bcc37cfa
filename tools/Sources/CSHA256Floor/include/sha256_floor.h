// The signing benchmark's floor (tools/bench-sign.sh): libcrypto's SHA-256 (SHA256_Init/Update/Final), once
// per tile by floor-sign, the least a pass that hashes every tile must do beside reading it.
#include <stddef.h>

/// SHA-256 of `length` bytes at `bytes` into the 32 bytes at `digest`; 0 on success.
int sha256_floor(const void *bytes, size_t length, unsigned char *digest);
