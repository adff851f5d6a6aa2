#define _GNU_SOURCE
#include "CSystem.h"
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <linux/futex.h>
#include <fcntl.h>
#include <stdlib.h>

int csys_open_anonymous(const char *dir) {
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) return fd;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/.pushemu-spool-XXXXXX", dir) >= (int)sizeof path) { errno = ENAMETOOLONG; return -1; }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0) unlink(path);
    return fd;
}

int csys_punch_hole(int fd, int64_t offset, int64_t length) {
    return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}

int csys_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}
int csys_epoll_add(int epfd, int fd, uint32_t events, uint64_t data) { return ctl(epfd, EPOLL_CTL_ADD, fd, events, data); }
int csys_epoll_mod(int epfd, int fd, uint32_t events, uint64_t data) { return ctl(epfd, EPOLL_CTL_MOD, fd, events, data); }
int csys_epoll_del(int epfd, int fd) { return ctl(epfd, EPOLL_CTL_DEL, fd, 0, 0); }

int csys_epoll_wait(int epfd, csys_event *out, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n;
    do { n = epoll_wait(epfd, evs, max, timeout_ms); } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) { out[i].events = evs[i].events; out[i].data = evs[i].data.u64; }
    return n;
}

int csys_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }
int csys_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
int csys_tcp_socket(int family) { return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

void csys_block_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);   /* a file-size limit makes writes fail (EFBIG), handled, instead of killing the process */
}

int csys_wait_signal(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {}
    return sig;
}

static void write_all(int fd, const char *s) {
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t n = write(fd, s, len);
        if (n < 0) { if (errno == EINTR) continue; return; }
        s += n; len -= (size_t)n;
    }
}
void csys_write_stderr(const char *s) { write_all(2, s); }
void csys_write_stdout(const char *s) { write_all(1, s); }

uint64_t csys_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
int64_t csys_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
void csys_name_thread(const char *name) {
    char buf[16];
    snprintf(buf, sizeof buf, "%s", name);
    (void)pthread_setname_np(pthread_self(), buf);
}
int csys_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}
int csys_peer_name(int fd, char *buf, size_t len) {
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0) return -1;
    char host[INET6_ADDRSTRLEN] = {0};
    int port = 0;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
        return snprintf(buf, len, "%s:%d", host, port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
        return snprintf(buf, len, "[%s]:%d", host, port);
    }
    return -1;
}

void csys_tune_malloc(void) {
    mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
    mallopt(M_TOP_PAD, 16 * 1024 * 1024);
}

void csys_trim_heap(void) { malloc_trim(0); }

void csys_heap_usage(size_t *in_use, size_t *held_free) {
    struct mallinfo2 m = mallinfo2();
    *in_use = m.uordblks + m.hblkhd;
    *held_free = m.fordblks;
}

long csys_raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    return (long)rl.rlim_cur;
}

uint64_t csys_random_u64(void) {
    uint64_t v = 0;
    while (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {}
    return v;
}

/* The commit a packaged build was made from: Scripts/package passes -DPUSHEMU_COMMIT="\"<sha>\"". */
const char *csys_build_commit(void) {
#ifdef PUSHEMU_COMMIT
    return PUSHEMU_COMMIT;
#else
    return "";
#endif
}

/* Spins a while (the holder is usually about to let go), then sleeps on the word marked 2 so
   that the unlock knows to wake one sleeper; a woken thread takes the word as 2 again, since
   others may still sleep on it. */
void csys_lock_slow(uint32_t *word) {
    for (int i = 0; i < 100; i++) {
        uint32_t seen = __atomic_load_n(word, __ATOMIC_RELAXED);
        if (seen == 0) {
            uint32_t expected = 0;
            if (__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
        }
        __builtin_ia32_pause();
    }
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    }
}

void csys_unlock_wake(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* CRC-32C: reflected polynomial 0x82F63B78. */
static uint32_t crc32c_table[256];
static int crc32c_table_ready;

static void crc32c_make_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
    __atomic_store_n(&crc32c_table_ready, 1, __ATOMIC_RELEASE);
}

static uint32_t crc32c_soft(uint32_t crc, const unsigned char *p, size_t len) {
    if (!__atomic_load_n(&crc32c_table_ready, __ATOMIC_ACQUIRE)) crc32c_make_table();
    while (len--) crc = crc32c_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hard(uint32_t crc, const unsigned char *p, size_t len) {
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

void *csys_memmem(const void *haystack, size_t haystack_len, const void *needle, size_t needle_len) {
    return memmem(haystack, haystack_len, needle, needle_len);
}

uint32_t csys_crc32c(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    crc = ~crc;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) return ~crc32c_hard(crc, p, len);
#endif
    return ~crc32c_soft(crc, p, len);
}
