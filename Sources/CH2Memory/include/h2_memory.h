/* An nghttp2 allocator for one session: size-class free lists in front of malloc.
 *
 * nghttp2 allocates and frees several small blocks per request (the stream, header buffers,
 * the outbound frame, the response's header copy). Through glibc each costs a malloc and a
 * free, and with many streams in flight most of them miss glibc's per-thread cache. A session
 * is only ever used by one thread at a time (its event loop's; its deletion comes last), so
 * these free lists need no locking. What they keep is bounded (PUSHEMU_H2_CACHE_BYTES); larger
 * blocks and anything beyond the bound go straight back to malloc. */
#ifndef PUSHEMU_H2_MEMORY_H
#define PUSHEMU_H2_MEMORY_H

#include <nghttp2/nghttp2.h>

#define PUSHEMU_H2_CACHE_BYTES (32 * 1024)

typedef struct pushemu_h2_memory pushemu_h2_memory;

/* A new allocator (NULL when out of memory). */
pushemu_h2_memory *pushemu_h2_memory_new(void);
/* The nghttp2_mem to pass to nghttp2_session_server_new3; valid while the allocator lives. */
nghttp2_mem *pushemu_h2_memory_mem(pushemu_h2_memory *m);
/* Frees the cached blocks and the allocator (after nghttp2_session_del). */
void pushemu_h2_memory_free(pushemu_h2_memory *m);
/* Bytes held in the free lists (for tests). */
size_t pushemu_h2_memory_cached(const pushemu_h2_memory *m);

#endif
