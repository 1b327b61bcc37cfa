// The system's libcrypto (OpenSSL 3), on Linux only (Apple platforms use CryptoKit): MD5 and
// SHA-256 (EVP digests), Ed25519 signatures (EVP_PKEY) and the CSPRNG that draws a key's seed.
#include <openssl/evp.h>
#include <openssl/rand.h>
