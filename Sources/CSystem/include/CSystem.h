#ifndef PUSHEMU_CSYSTEM_H
#define PUSHEMU_CSYSTEM_H
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/* epoll: struct epoll_event is packed on x86_64, so it never crosses into Swift. */
typedef struct { uint32_t events; uint64_t data; } csys_event;
#define CSYS_EPOLLIN 0x001u
#define CSYS_EPOLLOUT 0x004u
#define CSYS_EPOLLERR 0x008u
#define CSYS_EPOLLHUP 0x010u
#define CSYS_EPOLLRDHUP 0x2000u
#define CSYS_EPOLLEXCLUSIVE 0x10000000u
/* A file with no name in `dir` (O_TMPFILE, else a unique name unlinked at once): gone when
   closed. -1 with errno on failure. */
int csys_open_anonymous(const char *dir);
/* Gives the disk blocks of [offset, offset+length) back; the file keeps its size. 0 or -1. */
int csys_punch_hole(int fd, int64_t offset, int64_t length);
int csys_epoll_create(void);
int csys_epoll_add(int epfd, int fd, uint32_t events, uint64_t data);
int csys_epoll_mod(int epfd, int fd, uint32_t events, uint64_t data);
int csys_epoll_del(int epfd, int fd);
int csys_epoll_wait(int epfd, csys_event *events, int max, int timeout_ms);

/* accept4 with SOCK_NONBLOCK | SOCK_CLOEXEC. */
int csys_accept(int fd);
/* eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC). */
int csys_eventfd(void);
/* A nonblocking, close-on-exec TCP socket for the given family. */
int csys_tcp_socket(int family);
/* Block SIGINT, SIGTERM, SIGHUP for this thread and the threads it creates; ignore SIGPIPE. */
void csys_block_signals(void);
/* Wait for SIGINT/SIGTERM/SIGHUP; returns the signal number. */
int csys_wait_signal(void);
/* Unbuffered write of a whole string to stderr / stdout. */
void csys_write_stderr(const char *s);
void csys_write_stdout(const char *s);
/* Monotonic clock in nanoseconds. */
uint64_t csys_monotonic_ns(void);
/* Wall clock in milliseconds since the epoch. */
int64_t csys_wall_ms(void);
/* Keep freed memory in the allocator instead of trimming and regrowing thread arenas
   (each regrow is an mprotect plus page faults on the request path). */
void csys_tune_malloc(void);
/* Gives free heap memory back to the kernel (malloc_trim) after buffers shrank. */
void csys_trim_heap(void);
/* The allocator's bytes in use and free-but-held, over every arena (mallinfo2). */
void csys_heap_usage(size_t *in_use, size_t *held_free);
/* Raises the soft open-file limit to the hard limit; returns the new soft limit. */
long csys_raise_nofile_limit(void);
/* 64 random bits from the kernel (getrandom). */
uint64_t csys_random_u64(void);
/* Names the calling thread (at most 15 bytes are kept): what top -H and /proc show. */
void csys_name_thread(const char *name);
/* Number of online CPUs. */
int csys_cpu_count(void);
/* Peer address of a socket as text "host:port", written into buf. */
int csys_peer_name(int fd, char *buf, size_t len);
/* CRC-32C (Castagnoli) of `len` bytes, continuing from `crc` (0 to start): the SSE 4.2
   instruction where the processor has it, a table otherwise. The state log frames its records
   and snapshot sections with it. */
uint32_t csys_crc32c(uint32_t crc, const void *data, size_t len);

/// glibc's memmem (a GNU extension Swift's Glibc does not show): where `needle` first occurs in
/// `haystack`, or NULL.
void *csys_memmem(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len);
/* The commit of a packaged build (Scripts/package), or "" for a plain build. */
const char *csys_build_commit(void);

/* A futex lock word (FutexLock in Transport): 0 free, 1 held, 2 held with sleepers. Unlike a
   priority-inheritance futex, unlocking frees the word for whichever thread comes first rather
   than handing it to a sleeper, so a lock that many threads take for a moment does not turn into
   a queue that moves one context switch at a time. Uncontended: one compare-and-swap each way. */
void csys_lock_slow(uint32_t *word);
void csys_unlock_wake(uint32_t *word);
static inline void csys_lock(uint32_t *word) {
    uint32_t expected = 0;
    if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    csys_lock_slow(word);
}
static inline void csys_unlock(uint32_t *word) {
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) csys_unlock_wake(word);
}
/* Words and pointers in memory Swift cannot declare atomic (a fleet's paged member counts):
   relaxed loads, compare-and-swap, acquire/release pointer publication. */
static inline uint32_t csys_load_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void csys_store_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline int csys_cas_u32(uint32_t *p, uint32_t expected, uint32_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
static inline void *csys_load_ptr(void *const *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline int csys_cas_ptr(void **p, void *expected, void *desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
#endif
