/* Size-class free lists for one nghttp2 session (see h2_memory.h). */
#include "h2_memory.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Classes of 64, 128, ..., 4096 usable bytes; larger blocks are plain malloc blocks. */
#define CLASSES 7
#define BIG CLASSES
/* Every block starts with this header, which keeps the caller's pointer 16-byte aligned. */
typedef struct { size_t cls; size_t size; } header;
typedef struct node { struct node *next; } node;

struct pushemu_h2_memory {
    nghttp2_mem mem;
    node *free[CLASSES];
    size_t cached;
};

static inline size_t class_size(size_t c) { return (size_t)64 << c; }

static inline size_t class_for(size_t n) {
    if (n <= 64) return 0;
    size_t c = (size_t)(64 - __builtin_clzll((unsigned long long)(n - 1))) - 6;   /* ceil(log2 n) - 6 */
    return c < CLASSES ? c : BIG;
}

static void *h2_malloc(size_t n, void *ud) {
    pushemu_h2_memory *m = ud;
    size_t c = class_for(n);
    if (c < CLASSES && m->free[c]) {
        node *b = m->free[c];
        m->free[c] = b->next;
        m->cached -= class_size(c);
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

static void h2_free(void *p, void *ud) {
    if (!p) return;
    pushemu_h2_memory *m = ud;
    header *h = (header *)p - 1;
    size_t c = h->cls;
    if (c < CLASSES && m->cached + class_size(c) <= PUSHEMU_H2_CACHE_BYTES) {
        node *b = p;
        b->next = m->free[c];
        m->free[c] = b;
        m->cached += class_size(c);
        return;
    }
    free(h);
}

static void *h2_calloc(size_t count, size_t size, void *ud) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = h2_malloc(count * size, ud);
    if (p) memset(p, 0, count * size);
    return p;
}

static void *h2_realloc(void *p, size_t n, void *ud) {
    if (!p) return h2_malloc(n, ud);
    if (n == 0) { h2_free(p, ud); return NULL; }
    header *h = (header *)p - 1;
    if (n <= h->size) return p;
    void *q = h2_malloc(n, ud);
    if (!q) return NULL;
    memcpy(q, p, h->size);
    h2_free(p, ud);
    return q;
}

pushemu_h2_memory *pushemu_h2_memory_new(void) {
    pushemu_h2_memory *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->mem.mem_user_data = m;
    m->mem.malloc = h2_malloc;
    m->mem.free = h2_free;
    m->mem.calloc = h2_calloc;
    m->mem.realloc = h2_realloc;
    return m;
}

nghttp2_mem *pushemu_h2_memory_mem(pushemu_h2_memory *m) { return &m->mem; }

void pushemu_h2_memory_free(pushemu_h2_memory *m) {
    if (!m) return;
    for (size_t c = 0; c < CLASSES; c++) {
        node *b = m->free[c];
        while (b) {
            node *next = b->next;
            free((header *)b - 1);
            b = next;
        }
    }
    free(m);
}

size_t pushemu_h2_memory_cached(const pushemu_h2_memory *m) { return m->cached; }
