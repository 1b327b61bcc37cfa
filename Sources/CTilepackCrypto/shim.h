// The system's libcrypto (OpenSSL 3), for MD5 on Linux only: Apple platforms use CryptoKit.
#include <openssl/evp.h>
