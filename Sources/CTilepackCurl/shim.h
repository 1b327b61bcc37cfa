// libcurl for TilepackCurl. curl's option setters are variadic C functions, which Swift cannot
// call: these typed wrappers can be.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

typedef size_t (*tilepack_curl_data_callback)(char *data, size_t size, size_t count, void *context);

static inline CURLcode tilepack_curl_global_init(void) { return curl_global_init(CURL_GLOBAL_ALL); }

static inline CURLcode tilepack_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tilepack_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tilepack_curl_set_callback(CURL *handle, CURLoption option, tilepack_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode tilepack_curl_response_code(CURL *handle, long *code) {
    return curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}

static inline CURLMcode tilepack_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/// The result of a finished transfer (a member of an anonymous union in CURLMsg).
static inline CURLcode tilepack_curl_message_result(const CURLMsg *message) { return message->data.result; }
