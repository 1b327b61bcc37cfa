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

/// CURLOPT_PREREQFUNCTION's (libcurl 7.80): called just before a request is written on a
/// connection, new or reused, with its addresses; CURL_PREREQFUNC_ABORT stops the transfer.
typedef int (*tilepack_curl_prereq_callback)(void *context, char *primary_ip, char *local_ip, int primary_port, int local_port);
/// CURLOPT_SOCKOPTFUNCTION's: a socket curl just made (before it connects).
typedef int (*tilepack_curl_sockopt_callback)(void *context, curl_socket_t fd, curlsocktype purpose);
/// CURLOPT_CLOSESOCKETFUNCTION's: curl gives a socket up; the callback closes it.
typedef int (*tilepack_curl_closesocket_callback)(void *context, curl_socket_t fd);

/// CURLE_UNKNOWN_OPTION where libcurl's headers or library predate CURLOPT_PREREQFUNCTION (7.80).
CURLcode tilepack_curl_set_prereq_callback(CURL *handle, tilepack_curl_prereq_callback value, void *context);
CURLcode tilepack_curl_set_socket_callbacks(
    CURL *handle, tilepack_curl_sockopt_callback opened, tilepack_curl_closesocket_callback closing, void *context);

/// Whether bytes wait to be read on a connected socket, looked at without reading them
/// (recv with MSG_PEEK | MSG_DONTWAIT): 1 when some do, 2 when some do and the peer has closed
/// its side behind them (Linux: POLLRDHUP; a TLS peer's close_notify), 0 when none do, 3 when
/// none do and the stream has ended (the peer closed), -1 on an error.
int tilepack_socket_has_bytes(curl_socket_t fd);
/// The socket's local port (getsockname), its address as text in `address`; -1 when it has none.
int tilepack_socket_local_port(curl_socket_t fd, char *address, size_t capacity);
int tilepack_socket_close(curl_socket_t fd);

/// The result of a finished transfer (a member of an anonymous union in CURLMsg).
static inline CURLcode tilepack_curl_message_result(const CURLMsg *message) { return message->data.result; }

#endif
