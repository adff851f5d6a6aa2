/* Size-class free lists for one nghttp2 session (see h2_memory.h). */
#include "h2_memory.h"
#include "size_classes.h"

/* Classes of 64, 128, ..., 4096 usable bytes; larger blocks are plain malloc blocks. */
#define SHIFT 6
#define CLASSES 7

struct pushemu_h2_memory {
    nghttp2_mem mem;
    pushemu_free_node *free[CLASSES];
    size_t cached;
};

static void *h2_malloc(size_t n, void *ud) {
    pushemu_h2_memory *m = ud;
    size_t c = pushemu_class_for(n, SHIFT, CLASSES);
    if (c < CLASSES && m->free[c]) {
        m->cached -= pushemu_class_size(c, SHIFT);
        return pushemu_list_pop(&m->free[c]);
    }
    return pushemu_block_new(c, n, SHIFT, CLASSES);
}

static void h2_free(void *p, void *ud) {
    if (!p) return;
    pushemu_h2_memory *m = ud;
    pushemu_block_header *h = pushemu_block_header_of(p);
    size_t c = h->cls;
    if (c < CLASSES && m->cached + pushemu_class_size(c, SHIFT) <= PUSHEMU_H2_CACHE_BYTES) {
        pushemu_list_push(&m->free[c], p);
        m->cached += pushemu_class_size(c, SHIFT);
        return;
    }
    free(h);
}

static void *h2_calloc(size_t count, size_t size, void *ud) { return pushemu_block_calloc(count, size, h2_malloc, ud); }

static void *h2_realloc(void *p, size_t n, void *ud) {
    if (p && n == 0) { h2_free(p, ud); return NULL; }
    return pushemu_block_realloc(p, n, h2_malloc, h2_free, ud);
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
    pushemu_lists_release(m->free, CLASSES);
    free(m);
}

size_t pushemu_h2_memory_cached(const pushemu_h2_memory *m) { return m->cached; }
