/* Per-thread size-class free lists for libcurl (see curl_memory.h). */
#include "curl_memory.h"
#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Classes of 32, 64, ..., 32768 usable bytes; larger blocks are plain malloc blocks. */
#define CLASSES 11
#define BIG CLASSES
/* Every block starts with this header, which keeps the caller's pointer 16-byte aligned. */
typedef struct { size_t cls; size_t size; } header;
typedef struct node { struct node *next; } node;

typedef struct {
    node *free[CLASSES];
    size_t cached;
    int registered;
} cache;

static __thread cache tc;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static inline size_t class_size(size_t c) { return (size_t)32 << c; }

static inline size_t class_for(size_t n) {
    if (n <= 32) return 0;
    size_t c = (size_t)(64 - __builtin_clzll((unsigned long long)(n - 1))) - 5;   /* ceil(log2 n) - 5 */
    return c < CLASSES ? c : BIG;
}

void pushemu_curl_memory_release_thread(void) {
    for (size_t c = 0; c < CLASSES; c++) {
        node *b = tc.free[c];
        while (b) {
            node *next = b->next;
            free((header *)b - 1);
            b = next;
        }
        tc.free[c] = NULL;
    }
    tc.cached = 0;
}

static _Atomic size_t released_at_exit;

size_t pushemu_curl_memory_released_at_exit(void) { return released_at_exit; }

static void thread_exit(void *unused) {
    (void)unused;
    released_at_exit += tc.cached;
    pushemu_curl_memory_release_thread();
    tc.registered = 0;
}

static void make_exit_key(void) { pthread_key_create(&exit_key, thread_exit); }

void *pushemu_curl_malloc(size_t n) {
    size_t c = class_for(n);
    if (c < CLASSES && tc.free[c]) {
        node *b = tc.free[c];
        tc.free[c] = b->next;
        tc.cached -= class_size(c);
        return b;
    }
    size_t usable = c < CLASSES ? class_size(c) : n;
    if (usable > SIZE_MAX - sizeof(header)) return NULL;
    header *h = malloc(sizeof(header) + usable);
    if (!h) return NULL;
    h->cls = c;
    h->size = usable;
    return h + 1;
}

/* Off the fast path: the thread's first cached block (registers its release at thread exit),
 * or a block the lists do not keep. */
__attribute__((noinline)) static void free_slow(header *h) {
    size_t c = h->cls;
    if (c < CLASSES && !tc.registered && tc.cached + class_size(c) <= PUSHEMU_CURL_CACHE_BYTES) {
        pthread_once(&exit_once, make_exit_key);
        if (pthread_setspecific(exit_key, &tc) == 0) {
            tc.registered = 1;
            node *b = (node *)(h + 1);
            b->next = tc.free[c];
            tc.free[c] = b;
            tc.cached += class_size(c);
            return;
        }
    }
    free(h);
}

__attribute__((noinline)) static void free_block(void *p) {
    header *h = (header *)p - 1;
    size_t c = h->cls;
    if (__builtin_expect(c < CLASSES && tc.registered && tc.cached + class_size(c) <= PUSHEMU_CURL_CACHE_BYTES, 1)) {
        node *b = p;
        b->next = tc.free[c];
        tc.free[c] = b;
        tc.cached += class_size(c);
        return;
    }
    free_slow(h);
}

/* libcurl frees many NULL pointers (about 80 of its 110 frees per transfer): no frame for them. */
void pushemu_curl_free(void *p) {
    if (p) free_block(p);
}

void *pushemu_curl_calloc(size_t count, size_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = pushemu_curl_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void *pushemu_curl_realloc(void *p, size_t n) {
    if (!p) return pushemu_curl_malloc(n);
    header *h = (header *)p - 1;
    if (n <= h->size) return p;
    void *q = pushemu_curl_malloc(n);
    if (!q) return NULL;
    memcpy(q, p, h->size);
    pushemu_curl_free(p);
    return q;
}

char *pushemu_curl_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = pushemu_curl_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

size_t pushemu_curl_memory_cached(void) { return tc.cached; }

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static long init_flags;
static int init_result;

static void global_init(void) {
    init_result = (int)curl_global_init_mem(init_flags, pushemu_curl_malloc, pushemu_curl_free, pushemu_curl_realloc,
                                             pushemu_curl_strdup, pushemu_curl_calloc);
}

int pushemu_curl_global_init(long flags) {
    init_flags = flags;
    pthread_once(&init_once, global_init);
    return init_result;
}
