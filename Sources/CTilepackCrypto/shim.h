// The system's libcrypto (OpenSSL 3), on Linux only (Apple platforms use CryptoKit): MD5 and
// SHA-256 (EVP digests), Ed25519 signatures (EVP_PKEY) and the CSPRNG that draws a key's seed.
// SHA-256's own functions (SHA256_Init/Update/Final, on a context on the caller's stack) hash the
// many short inputs of a signed archive's tree without EVP's per-call dispatch; OpenSSL 3 marks
// them deprecated in favour of EVP, which is what costs here, so the marks are suppressed.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
