#include "sha256_floor.h"
#include <openssl/evp.h>

int sha256_floor(const void *bytes, size_t length, unsigned char *digest) {
    unsigned int size = 0;
    return EVP_Digest(bytes, length, digest, &size, EVP_sha256(), NULL) == 1 ? 0 : 1;
}
