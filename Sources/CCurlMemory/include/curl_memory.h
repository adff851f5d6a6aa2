/* libcurl's allocator: per-thread size-class free lists in front of malloc.
 *
 * A tracking transfer makes about forty allocations inside libcurl (the request's header
 * lines, its printf buffers, the URL's parts, the response's header buffer) and frees them at
 * its end. Through glibc they cost about 10k instructions per transfer (a sixth of a lane's),
 * most of it in _int_free, since many of the blocks miss glibc's small per-thread cache.
 * libcurl takes its allocator once per process (curl_global_init_mem), with no context
 * pointer, so the free lists are thread-local: a lane's transfers allocate and free on its own
 * thread without locks. A block freed on another thread joins that thread's lists (its header
 * says its class). What each thread keeps is bounded (PUSHEMU_CURL_CACHE_BYTES), and a thread's
 * lists go back to malloc when it exits. */
#ifndef PUSHEMU_CURL_MEMORY_H
#define PUSHEMU_CURL_MEMORY_H

#include <stddef.h>

#define PUSHEMU_CURL_CACHE_BYTES (256 * 1024)

/* curl_global_init with the allocator below, once per process (later calls return the first
 * call's result). Call it before any other libcurl function. */
int pushemu_curl_global_init(long flags);

/* The allocator itself (exposed for its tests). */
void *pushemu_curl_malloc(size_t n);
void pushemu_curl_free(void *p);
void *pushemu_curl_realloc(void *p, size_t n);
void *pushemu_curl_calloc(size_t count, size_t size);
char *pushemu_curl_strdup(const char *s);

/* Bytes in the calling thread's free lists. */
size_t pushemu_curl_memory_cached(void);
/* Returns the calling thread's free lists to malloc. */
void pushemu_curl_memory_release_thread(void);
/* Bytes that exiting threads have returned to malloc, in all (for tests). */
size_t pushemu_curl_memory_released_at_exit(void);

#endif
