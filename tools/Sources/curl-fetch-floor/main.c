// curl-fetch-floor: the floor of `tilepack fetch`, the least a download of many tiles needs, in
// plain C on the transport tilepack uses on Linux: libcurl's multi interface with the options
// TilepackCurl sets (at most CONNECTIONS connections per host, HTTP/2 over TLS with every
// transfer multiplexed on one connection and waiting for it rather than opening another
// (CURLOPT_PIPEWAIT), HTTP/1.1 on cleartext http, kept-alive connections), IN_FLIGHT transfers at
// once, each body written into a buffer in memory (one per transfer slot, reused) and its status
// checked; no template, no checks of the bytes, no store. Run by tools/bench-fetch.sh.
//
//   curl-fetch-floor BASE_URL PATHS_FILE IN_FLIGHT CONNECTIONS
//
// BASE_URL is prefixed to every line of PATHS_FILE. Prints the tiles per second of the transfer
// loop (from the first request to the last answer); exits 1 if any answer was not a 200.
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slot {
    CURL *easy;
    char *body;
    size_t size, capacity;
    char url[2048];
};

static size_t write_body(char *data, size_t size, size_t count, void *context) {
    struct slot *slot = context;
    size_t length = size * count;
    if (slot->size + length > slot->capacity) {
        size_t capacity = slot->capacity ? slot->capacity : 16384;
        while (capacity < slot->size + length) capacity *= 2;
        char *grown = realloc(slot->body, capacity);
        if (!grown) return 0;
        slot->body = grown;
        slot->capacity = capacity;
    }
    memcpy(slot->body + slot->size, data, length);
    slot->size += length;
    return length;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5 || atoi(argv[3]) < 1 || atoi(argv[4]) < 1) {
        fprintf(stderr, "usage: curl-fetch-floor BASE_URL PATHS_FILE IN_FLIGHT CONNECTIONS\n");
        return 64;
    }
    const char *base = argv[1];
    int in_flight = atoi(argv[3]), connections = atoi(argv[4]);
    FILE *list = fopen(argv[2], "r");
    if (!list) { perror(argv[2]); return 66; }
    size_t count = 0, capacity = 1024;
    char **paths = malloc(capacity * sizeof *paths);
    char line[1024];
    while (paths && fgets(line, sizeof line, list)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) continue;
        if (count == capacity) paths = realloc(paths, (capacity *= 2) * sizeof *paths);
        if (paths) paths[count++] = strdup(line);
    }
    fclose(list);
    if (!paths || count == 0) { fprintf(stderr, "curl-fetch-floor: no paths in %s\n", argv[2]); return 66; }

    curl_global_init(CURL_GLOBAL_ALL);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)connections);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, 64L);
    curl_multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    struct slot *slots = calloc(in_flight, sizeof *slots);
    size_t next = 0, done = 0, failed = 0, bytes = 0;

    double start = now();
    for (int index = 0; index < in_flight && next < count; index++) {
        struct slot *slot = &slots[index];
        slot->easy = curl_easy_init();
        curl_easy_setopt(slot->easy, CURLOPT_PRIVATE, slot);
        curl_easy_setopt(slot->easy, CURLOPT_WRITEFUNCTION, write_body);
        curl_easy_setopt(slot->easy, CURLOPT_WRITEDATA, slot);
        curl_easy_setopt(slot->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(slot->easy, CURLOPT_TIMEOUT_MS, 30000L);
        curl_easy_setopt(slot->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        curl_easy_setopt(slot->easy, CURLOPT_PIPEWAIT, 1L);
        snprintf(slot->url, sizeof slot->url, "%s%s", base, paths[next++]);
        curl_easy_setopt(slot->easy, CURLOPT_URL, slot->url);
        curl_multi_add_handle(multi, slot->easy);
    }
    int running = 1;
    while (done < count) {
        curl_multi_perform(multi, &running);
        CURLMsg *message;
        int left;
        while ((message = curl_multi_info_read(multi, &left))) {
            if (message->msg != CURLMSG_DONE) continue;
            CURL *easy = message->easy_handle;
            struct slot *slot;
            long status = 0;
            curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&slot);
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            if (message->data.result != CURLE_OK || status != 200) {
                fprintf(stderr, "failed: %s (%s, status %ld)\n", slot->url, curl_easy_strerror(message->data.result), status);
                failed++;
            }
            bytes += slot->size;
            slot->size = 0;
            done++;
            curl_multi_remove_handle(multi, easy);
            if (next < count) {
                snprintf(slot->url, sizeof slot->url, "%s%s", base, paths[next++]);
                curl_easy_setopt(easy, CURLOPT_URL, slot->url);
                curl_multi_add_handle(multi, easy);
            }
        }
        if (done < count) curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    double seconds = now() - start;
    printf("%.1f\n", count / seconds);
    fprintf(stderr, "curl-fetch-floor: %zu tiles, %zu bytes, %zu failed in %.3f s\n", count, bytes, failed, seconds);
    for (int index = 0; index < in_flight; index++) {
        if (slots[index].easy) curl_easy_cleanup(slots[index].easy);
        free(slots[index].body);
    }
    curl_multi_cleanup(multi);
    curl_global_cleanup();
    return failed ? 1 : 0;
}
