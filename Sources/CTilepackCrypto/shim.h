// The system's libcrypto (OpenSSL 3), for MD5 and SHA-256 on Linux only: Apple platforms use CryptoKit.
#include <openssl/evp.h>
