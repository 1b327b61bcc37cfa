// libcurl for TilepackCurl, loaded when the first transport is made (dlopen of libcurl.so.4), not
// when the program starts: a program that links TilepackCurl but fetches plain http with its own
// client (the command line) never loads libcurl, OpenSSL, GnuTLS, Kerberos, LDAP and the rest of
// the thirty-odd libraries they bring, which cost every start of `tilepack` about 5 ms.
//
// curl's types and constants come from <curl/curl.h> (libcurl4-openssl-dev); its functions are
// called through these wrappers, which also give Swift typed forms of the variadic option
// setters. Call tilepack_curl_load() first and the others only after it returned 0.
#ifndef TILEPACK_CURL_H
#define TILEPACK_CURL_H

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <stddef.h>

typedef size_t (*tilepack_curl_data_callback)(char *data, size_t size, size_t count, void *context);
/// CURLOPT_SEEKFUNCTION's: moves a request body's read position (curl rewinds a body it sends again).
typedef int (*tilepack_curl_seek_callback)(void *context, curl_off_t offset, int origin);

/// Loads libcurl and runs curl_global_init once per process (thread-safe). 0 when libcurl is
/// usable; otherwise -1 and `reason` holds why (the loader's message, or a missing symbol).
int tilepack_curl_load(char *reason, size_t capacity);

CURL *tilepack_curl_easy_init(void);
void tilepack_curl_easy_cleanup(CURL *handle);
void tilepack_curl_easy_reset(CURL *handle);
const char *tilepack_curl_easy_strerror(CURLcode code);
CURLcode tilepack_curl_set_long(CURL *handle, CURLoption option, long value);
CURLcode tilepack_curl_set_pointer(CURL *handle, CURLoption option, const void *value);
CURLcode tilepack_curl_set_callback(CURL *handle, CURLoption option, tilepack_curl_data_callback value);
CURLcode tilepack_curl_set_seek_callback(CURL *handle, tilepack_curl_seek_callback value);
CURLcode tilepack_curl_response_code(CURL *handle, long *code);
/// The HTTP version of the transfer's last response: CURL_HTTP_VERSION_1_0, _1_1, _2_0 or _3 (0: none).
CURLcode tilepack_curl_http_version(CURL *handle, long *version);

CURLM *tilepack_curl_multi_init(void);
CURLMcode tilepack_curl_multi_cleanup(CURLM *multi);
CURLMcode tilepack_curl_multi_set_long(CURLM *multi, CURLMoption option, long value);
CURLMcode tilepack_curl_multi_add_handle(CURLM *multi, CURL *handle);
CURLMcode tilepack_curl_multi_remove_handle(CURLM *multi, CURL *handle);
CURLMcode tilepack_curl_multi_perform(CURLM *multi, int *running);
CURLMcode tilepack_curl_multi_poll(CURLM *multi, int timeout_ms);
CURLMcode tilepack_curl_multi_wakeup(CURLM *multi);
CURLMsg *tilepack_curl_multi_info_read(CURLM *multi, int *left);

struct curl_slist *tilepack_curl_slist_append(struct curl_slist *list, const char *text);
void tilepack_curl_slist_free_all(struct curl_slist *list);

/// The result of a finished transfer (a member of an anonymous union in CURLMsg).
static inline CURLcode tilepack_curl_message_result(const CURLMsg *message) { return message->data.result; }

#endif
