// POLLRDHUP (Linux): whether the peer has closed its side, with bytes still to read.
#define _GNU_SOURCE
#include "tilepack_curl.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// The functions TilepackCurl calls, resolved once from libcurl.so.4 (the soname of libcurl 7.16
// and later, every flavour: OpenSSL, GnuTLS, NSS).
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMcode (*multi_wakeup)(CURLM *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} curl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[256];

static void load(void) {
    // RTLD_LOCAL: libcurl's symbols (and those of the libraries it brings) stay out of the
    // program's global scope.
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "libcurl cannot be loaded (%s); install libcurl4", why ? why : "dlopen failed");
        return;
    }
    struct { const char *name; void **slot; } symbols[] = {
        {"curl_global_init", (void **)&curl.global_init},
        {"curl_easy_init", (void **)&curl.easy_init},
        {"curl_easy_cleanup", (void **)&curl.easy_cleanup},
        {"curl_easy_reset", (void **)&curl.easy_reset},
        {"curl_easy_strerror", (void **)&curl.easy_strerror},
        {"curl_easy_setopt", (void **)&curl.easy_setopt},
        {"curl_easy_getinfo", (void **)&curl.easy_getinfo},
        {"curl_multi_init", (void **)&curl.multi_init},
        {"curl_multi_cleanup", (void **)&curl.multi_cleanup},
        {"curl_multi_setopt", (void **)&curl.multi_setopt},
        {"curl_multi_add_handle", (void **)&curl.multi_add_handle},
        {"curl_multi_remove_handle", (void **)&curl.multi_remove_handle},
        {"curl_multi_perform", (void **)&curl.multi_perform},
        {"curl_multi_poll", (void **)&curl.multi_poll},
        {"curl_multi_wakeup", (void **)&curl.multi_wakeup},
        {"curl_multi_info_read", (void **)&curl.multi_info_read},
        {"curl_slist_append", (void **)&curl.slist_append},
        {"curl_slist_free_all", (void **)&curl.slist_free_all},
    };
    for (size_t index = 0; index < sizeof symbols / sizeof symbols[0]; index++) {
        *symbols[index].slot = dlsym(library, symbols[index].name);
        if (!*symbols[index].slot) {
            // curl_multi_poll and curl_multi_wakeup came with libcurl 7.66 and 7.68 (2019).
            snprintf(failure, sizeof failure, "libcurl.so.4 has no %s (libcurl 7.68 or later is needed)", symbols[index].name);
            return;
        }
    }
    if (curl.global_init(CURL_GLOBAL_ALL) != CURLE_OK) {
        snprintf(failure, sizeof failure, "curl_global_init failed");
        return;
    }
}

int tilepack_curl_load(char *reason, size_t capacity) {
    pthread_once(&once, load);
    if (failure[0] == 0) return 0;
    if (reason && capacity > 0) snprintf(reason, capacity, "%s", failure);
    return -1;
}

CURL *tilepack_curl_easy_init(void) { return curl.easy_init(); }
void tilepack_curl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }
void tilepack_curl_easy_reset(CURL *handle) { curl.easy_reset(handle); }
const char *tilepack_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }

CURLcode tilepack_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tilepack_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tilepack_curl_set_callback(CURL *handle, CURLoption option, tilepack_curl_data_callback value) {
    return curl.easy_setopt(handle, option, value);
}

CURLcode tilepack_curl_set_seek_callback(CURL *handle, tilepack_curl_seek_callback value) {
    return curl.easy_setopt(handle, CURLOPT_SEEKFUNCTION, value);
}

CURLcode tilepack_curl_response_code(CURL *handle, long *code) {
    return curl.easy_getinfo(handle, CURLINFO_RESPONSE_CODE, code);
}

CURLcode tilepack_curl_http_version(CURL *handle, long *version) {
    return curl.easy_getinfo(handle, CURLINFO_HTTP_VERSION, version);
}

CURLcode tilepack_curl_set_prereq_callback(CURL *handle, tilepack_curl_prereq_callback value, void *context) {
#ifdef CURL_PREREQFUNC_OK
    CURLcode code = curl.easy_setopt(handle, CURLOPT_PREREQFUNCTION, value);
    return code == CURLE_OK ? curl.easy_setopt(handle, CURLOPT_PREREQDATA, context) : code;
#else
    (void)handle, (void)value, (void)context;
    return CURLE_UNKNOWN_OPTION;
#endif
}

CURLcode tilepack_curl_set_socket_callbacks(
    CURL *handle, tilepack_curl_sockopt_callback opened, tilepack_curl_closesocket_callback closing, void *context) {
    CURLcode code = curl.easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, opened);
    if (code == CURLE_OK) code = curl.easy_setopt(handle, CURLOPT_SOCKOPTDATA, context);
    if (code == CURLE_OK) code = curl.easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, closing);
    if (code == CURLE_OK) code = curl.easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, context);
    return code;
}

int tilepack_socket_has_bytes(curl_socket_t fd) {
    char byte;
    for (;;) {
        ssize_t count = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (count > 0) break;
        if (count == 0) return 3;
        if (errno == EINTR) continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
#ifdef POLLRDHUP
    struct pollfd entry = {.fd = fd, .events = POLLRDHUP};
    if (poll(&entry, 1, 0) == 1 && (entry.revents & (POLLRDHUP | POLLHUP))) return 2;
#endif
    return 1;
}

int tilepack_socket_local_port(curl_socket_t fd, char *address, size_t capacity) {
    struct sockaddr_storage local;
    socklen_t length = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &length) != 0) return -1;
    if (local.ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&local;
        if (!inet_ntop(AF_INET, &v4->sin_addr, address, (socklen_t)capacity)) return -1;
        return ntohs(v4->sin_port);
    }
    if (local.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&local;
        if (!inet_ntop(AF_INET6, &v6->sin6_addr, address, (socklen_t)capacity)) return -1;
        return ntohs(v6->sin6_port);
    }
    return -1;
}

int tilepack_socket_close(curl_socket_t fd) { return close(fd); }

CURLM *tilepack_curl_multi_init(void) { return curl.multi_init(); }
CURLMcode tilepack_curl_multi_cleanup(CURLM *multi) { return curl.multi_cleanup(multi); }

CURLMcode tilepack_curl_multi_set_long(CURLM *multi, CURLMoption option, long value) {
    return curl.multi_setopt(multi, option, value);
}

CURLMcode tilepack_curl_multi_add_handle(CURLM *multi, CURL *handle) { return curl.multi_add_handle(multi, handle); }
CURLMcode tilepack_curl_multi_remove_handle(CURLM *multi, CURL *handle) { return curl.multi_remove_handle(multi, handle); }
CURLMcode tilepack_curl_multi_perform(CURLM *multi, int *running) { return curl.multi_perform(multi, running); }
CURLMcode tilepack_curl_multi_poll(CURLM *multi, int timeout_ms) { return curl.multi_poll(multi, NULL, 0, timeout_ms, NULL); }
CURLMcode tilepack_curl_multi_wakeup(CURLM *multi) { return curl.multi_wakeup(multi); }
CURLMsg *tilepack_curl_multi_info_read(CURLM *multi, int *left) { return curl.multi_info_read(multi, left); }

struct curl_slist *tilepack_curl_slist_append(struct curl_slist *list, const char *text) {
    return curl.slist_append(list, text);
}

void tilepack_curl_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }
