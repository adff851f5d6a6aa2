/* The size classes and block layout shared by pushemu's two allocators (CH2Memory: one
 * nghttp2 session's; CCurlMemory: libcurl's, per thread). Class c holds 1 << (shift + c)
 * usable bytes; a request larger than the last class is a plain malloc block ("big"). Every
 * block starts with a header giving its class and usable size, which keeps the caller's
 * pointer 16-byte aligned and lets any free list take a block back. Each allocator keeps its own
 * free lists and its own bound on what they hold. */
#ifndef PUSHEMU_SIZE_CLASSES_H
#define PUSHEMU_SIZE_CLASSES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { size_t cls; size_t size; } pushemu_block_header;
typedef struct pushemu_free_node { struct pushemu_free_node *next; } pushemu_free_node;

static inline size_t pushemu_class_size(size_t c, unsigned shift) { return (size_t)1 << (shift + c); }

/* The class for `n` bytes, or `classes` (big) when none holds it. */
static inline size_t pushemu_class_for(size_t n, unsigned shift, size_t classes) {
    if (n <= ((size_t)1 << shift)) return 0;
    size_t c = (size_t)(64 - __builtin_clzll((unsigned long long)(n - 1))) - shift;   /* ceil(log2 n) - shift */
    return c < classes ? c : classes;
}

static inline pushemu_block_header *pushemu_block_header_of(void *p) { return (pushemu_block_header *)p - 1; }

/* A new block from malloc for `n` bytes of class `c` (its class's size, or `n` when big). */
static inline void *pushemu_block_new(size_t c, size_t n, unsigned shift, size_t classes) {
    size_t usable = c < classes ? pushemu_class_size(c, shift) : n;
    if (usable > SIZE_MAX - sizeof(pushemu_block_header)) return NULL;
    pushemu_block_header *h = malloc(sizeof(pushemu_block_header) + usable);
    if (!h) return NULL;
    h->cls = c;
    h->size = usable;
    return h + 1;
}

static inline void *pushemu_list_pop(pushemu_free_node **list) {
    pushemu_free_node *b = *list;
    *list = b->next;
    return b;
}

static inline void pushemu_list_push(pushemu_free_node **list, void *p) {
    pushemu_free_node *b = p;
    b->next = *list;
    *list = b;
}

/* Returns every block of `classes` lists to malloc. */
static inline void pushemu_lists_release(pushemu_free_node **lists, size_t classes) {
    for (size_t c = 0; c < classes; c++) {
        pushemu_free_node *b = lists[c];
        while (b) {
            pushemu_free_node *next = b->next;
            free(pushemu_block_header_of(b));
            b = next;
        }
        lists[c] = NULL;
    }
}

/* C's calloc and realloc in terms of an allocator's own malloc and free. */
static inline void *pushemu_block_calloc(size_t count, size_t size, void *(*alloc)(size_t, void *), void *ud) {
    if (size && count > SIZE_MAX / size) return NULL;
    void *p = alloc(count * size, ud);
    if (p) memset(p, 0, count * size);
    return p;
}

static inline void *pushemu_block_realloc(void *p, size_t n, void *(*alloc)(size_t, void *), void (*release)(void *, void *),
                                          void *ud) {
    if (!p) return alloc(n, ud);
    pushemu_block_header *h = pushemu_block_header_of(p);
    if (n <= h->size) return p;
    void *q = alloc(n, ud);
    if (!q) return NULL;
    memcpy(q, p, h->size);
    release(p, ud);
    return q;
}

#endif
