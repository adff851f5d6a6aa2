/* Per-thread size-class free lists for libcurl (see curl_memory.h). */
#include "curl_memory.h"
#include "size_classes.h"
#include <curl/curl.h>
#include <pthread.h>

/* Classes of 32, 64, ..., 32768 usable bytes; larger blocks are plain malloc blocks. */
#define SHIFT 5
#define CLASSES 11

typedef struct {
    pushemu_free_node *free[CLASSES];
    size_t cached;
    int registered;
} cache;

static __thread cache tc;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

void pushemu_curl_memory_release_thread(void) {
    pushemu_lists_release(tc.free, CLASSES);
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
    size_t c = pushemu_class_for(n, SHIFT, CLASSES);
    if (c < CLASSES && tc.free[c]) {
        tc.cached -= pushemu_class_size(c, SHIFT);
        return pushemu_list_pop(&tc.free[c]);
    }
    return pushemu_block_new(c, n, SHIFT, CLASSES);
}

/* Off the fast path: the thread's first cached block (registers its release at thread exit),
 * or a block the lists do not keep. */
__attribute__((noinline)) static void free_slow(void *p) {
    size_t c = pushemu_block_header_of(p)->cls;
    if (c < CLASSES && !tc.registered && tc.cached + pushemu_class_size(c, SHIFT) <= PUSHEMU_CURL_CACHE_BYTES) {
        pthread_once(&exit_once, make_exit_key);
        if (pthread_setspecific(exit_key, &tc) == 0) {
            tc.registered = 1;
            pushemu_list_push(&tc.free[c], p);
            tc.cached += pushemu_class_size(c, SHIFT);
            return;
        }
    }
    free(pushemu_block_header_of(p));
}

__attribute__((noinline)) static void free_block(void *p) {
    size_t c = pushemu_block_header_of(p)->cls;
    if (__builtin_expect(c < CLASSES && tc.registered && tc.cached + pushemu_class_size(c, SHIFT) <= PUSHEMU_CURL_CACHE_BYTES, 1)) {
        pushemu_list_push(&tc.free[c], p);
        tc.cached += pushemu_class_size(c, SHIFT);
        return;
    }
    free_slow(p);
}

/* libcurl frees many NULL pointers (about 80 of its 110 frees per transfer): no frame for them. */
void pushemu_curl_free(void *p) {
    if (p) free_block(p);
}

/* The shared calloc and realloc take an allocator with a context; libcurl's has none. */
static void *alloc_ud(size_t n, void *ud) { (void)ud; return pushemu_curl_malloc(n); }
static void release_ud(void *p, void *ud) { (void)ud; pushemu_curl_free(p); }

void *pushemu_curl_calloc(size_t count, size_t size) { return pushemu_block_calloc(count, size, alloc_ud, NULL); }

void *pushemu_curl_realloc(void *p, size_t n) { return pushemu_block_realloc(p, n, alloc_ud, release_ud, NULL); }

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
