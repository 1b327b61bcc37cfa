#define OPENSSL_SUPPRESS_DEPRECATED
#include "sha256_floor.h"
#include <openssl/sha.h>

// SHA-256's own functions on a context on the stack: the cheapest call libcrypto has (EVP's
// one-shot EVP_Digest allocates and frees a context per call).
int sha256_floor(const void *bytes, size_t length, unsigned char *digest) {
    SHA256_CTX context;
    if (SHA256_Init(&context) != 1 || SHA256_Update(&context, bytes, length) != 1) return 1;
    return SHA256_Final(digest, &context) == 1 ? 0 : 1;
}
