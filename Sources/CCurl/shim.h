#ifndef PUSHEMU_CCURL_SHIM_H
#define PUSHEMU_CCURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic: Swift cannot call them. */
static inline CURLcode pushemu_curl_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode pushemu_curl_setopt_ptr(CURL *h, CURLoption o, const void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode pushemu_curl_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
typedef size_t (*pushemu_curl_write_fn)(char *, size_t, size_t, void *);
static inline CURLcode pushemu_curl_setopt_write(CURL *h, pushemu_curl_write_fn f) { return curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, f); }
static inline CURLcode pushemu_curl_setopt_header_fn(CURL *h, pushemu_curl_write_fn f) { return curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, f); }
static inline CURLcode pushemu_curl_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode pushemu_curl_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode pushemu_curl_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
typedef int (*pushemu_curl_closesocket_fn)(void *, curl_socket_t);
static inline CURLcode pushemu_curl_setopt_closesocket(CURL *h, pushemu_curl_closesocket_fn f, void *clientp) {
    curl_easy_setopt(h, CURLOPT_CLOSESOCKETDATA, clientp);
    return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, f);
}
static inline CURLMcode pushemu_curl_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
/* The multi socket interface: libcurl tells the application which sockets to watch (epoll here). */
typedef int (*pushemu_curl_socket_fn)(CURL *, curl_socket_t, int, void *, void *);
typedef int (*pushemu_curl_timer_fn)(CURLM *, long, void *);
static inline CURLMcode pushemu_curl_multi_socket_callback(CURLM *m, pushemu_curl_socket_fn f, void *userp) {
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, userp);
    return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, f);
}
static inline CURLMcode pushemu_curl_multi_timer_callback(CURLM *m, pushemu_curl_timer_fn f, void *userp) {
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, userp);
    return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, f);
}
#endif
