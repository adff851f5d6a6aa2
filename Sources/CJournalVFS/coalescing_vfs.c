/* A SQLite VFS shim that coalesces contiguous writes (see coalescing_vfs.h). */
#include "coalescing_vfs.h"
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

typedef struct CFile {
    sqlite3_file base;        /* our methods */
    sqlite3_file *real;       /* the underlying VFS's file, allocated right after this struct */
    unsigned char *buf;       /* pending bytes, to be written at bufOffset */
    sqlite3_int64 bufOffset;
    int bufLen, bufCap;
    int coalesce;             /* WAL or main database */
} CFile;

static sqlite3_vfs *parent;

static int flush(CFile *f) {
    if (f->bufLen == 0) return SQLITE_OK;
    int rc = f->real->pMethods->xWrite(f->real, f->buf, f->bufLen, f->bufOffset);
    f->bufLen = 0;
    return rc;
}

static int cClose(sqlite3_file *p) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    int rc2 = f->real->pMethods->xClose(f->real);
    free(f->buf);
    f->buf = 0;
    return rc != SQLITE_OK ? rc : rc2;
}

static int cRead(sqlite3_file *p, void *out, int n, sqlite3_int64 off) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    if (rc != SQLITE_OK) return rc;
    return f->real->pMethods->xRead(f->real, out, n, off);
}

/* The unix VFS writes at most 128 KiB - 1 bytes a call (its seekAndWrite masks the length). */
enum { MAX_PENDING = 120 * 1024 };

static int cWrite(sqlite3_file *p, const void *data, int n, sqlite3_int64 off) {
    CFile *f = (CFile *)p;
    if (!f->coalesce) return f->real->pMethods->xWrite(f->real, data, n, off);
    if (f->bufLen > 0 && (off != f->bufOffset + f->bufLen || f->bufLen + n > MAX_PENDING)) {
        int rc = flush(f);
        if (rc != SQLITE_OK) return rc;
    }
    if (n > MAX_PENDING) return f->real->pMethods->xWrite(f->real, data, n, off);
    if (f->bufLen + n > f->bufCap) {
        int cap = f->bufCap ? f->bufCap : 64 * 1024;
        while (cap < f->bufLen + n) cap *= 2;
        unsigned char *b = realloc(f->buf, cap);
        if (!b) { int rc = flush(f); return rc != SQLITE_OK ? rc : f->real->pMethods->xWrite(f->real, data, n, off); }
        f->buf = b;
        f->bufCap = cap;
    }
    if (f->bufLen == 0) f->bufOffset = off;
    memcpy(f->buf + f->bufLen, data, n);
    f->bufLen += n;
    return SQLITE_OK;
}

static int cTruncate(sqlite3_file *p, sqlite3_int64 size) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int cSync(sqlite3_file *p, int flags) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int cFileSize(sqlite3_file *p, sqlite3_int64 *size) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int cLock(sqlite3_file *p, int level) { CFile *f = (CFile *)p; return f->real->pMethods->xLock(f->real, level); }
static int cUnlock(sqlite3_file *p, int level) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xUnlock(f->real, level);
}
static int cCheckReservedLock(sqlite3_file *p, int *out) { CFile *f = (CFile *)p; return f->real->pMethods->xCheckReservedLock(f->real, out); }
static int cFileControl(sqlite3_file *p, int op, void *arg) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}
static int cSectorSize(sqlite3_file *p) { CFile *f = (CFile *)p; return f->real->pMethods->xSectorSize(f->real); }
static int cDeviceCharacteristics(sqlite3_file *p) { CFile *f = (CFile *)p; return f->real->pMethods->xDeviceCharacteristics(f->real); }
static int cShmMap(sqlite3_file *p, int pg, int sz, int extend, void volatile **out) {
    CFile *f = (CFile *)p; return f->real->pMethods->xShmMap(f->real, pg, sz, extend, out);
}
static int cShmLock(sqlite3_file *p, int off, int n, int flags) { CFile *f = (CFile *)p; return f->real->pMethods->xShmLock(f->real, off, n, flags); }
static void cShmBarrier(sqlite3_file *p) { CFile *f = (CFile *)p; f->real->pMethods->xShmBarrier(f->real); }
static int cShmUnmap(sqlite3_file *p, int del) { CFile *f = (CFile *)p; return f->real->pMethods->xShmUnmap(f->real, del); }
static int cFetch(sqlite3_file *p, sqlite3_int64 off, int n, void **out) {
    CFile *f = (CFile *)p;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFetch(f->real, off, n, out);
}
static int cUnfetch(sqlite3_file *p, sqlite3_int64 off, void *ptr) { CFile *f = (CFile *)p; return f->real->pMethods->xUnfetch(f->real, off, ptr); }

static const sqlite3_io_methods methods = {
    3, cClose, cRead, cWrite, cTruncate, cSync, cFileSize, cLock, cUnlock, cCheckReservedLock, cFileControl,
    cSectorSize, cDeviceCharacteristics, cShmMap, cShmLock, cShmBarrier, cShmUnmap, cFetch, cUnfetch,
};

static int cOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *outFlags) {
    (void)vfs;
    CFile *f = (CFile *)file;
    memset(f, 0, sizeof *f);
    f->real = (sqlite3_file *)(f + 1);
    int rc = parent->xOpen(parent, name, f->real, flags, outFlags);
    if (rc != SQLITE_OK || !f->real->pMethods) { f->base.pMethods = 0; return rc; }
    if (f->real->pMethods->iVersion < 3) { f->real->pMethods->xClose(f->real); f->base.pMethods = 0; return SQLITE_CANTOPEN; }
    f->coalesce = (flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_DB)) != 0;
    f->base.pMethods = &methods;
    return SQLITE_OK;
}

static int cDelete(sqlite3_vfs *v, const char *n, int s) { (void)v; return parent->xDelete(parent, n, s); }
static int cAccess(sqlite3_vfs *v, const char *n, int fl, int *o) { (void)v; return parent->xAccess(parent, n, fl, o); }
static int cFullPathname(sqlite3_vfs *v, const char *n, int no, char *o) { (void)v; return parent->xFullPathname(parent, n, no, o); }
static void *cDlOpen(sqlite3_vfs *v, const char *n) { (void)v; return parent->xDlOpen(parent, n); }
static void cDlError(sqlite3_vfs *v, int n, char *m) { (void)v; parent->xDlError(parent, n, m); }
static void (*cDlSym(sqlite3_vfs *v, void *h, const char *s))(void) { (void)v; return parent->xDlSym(parent, h, s); }
static void cDlClose(sqlite3_vfs *v, void *h) { (void)v; parent->xDlClose(parent, h); }
static int cRandomness(sqlite3_vfs *v, int n, char *o) { (void)v; return parent->xRandomness(parent, n, o); }
static int cSleep(sqlite3_vfs *v, int us) { (void)v; return parent->xSleep(parent, us); }
static int cCurrentTime(sqlite3_vfs *v, double *t) { (void)v; return parent->xCurrentTime(parent, t); }
static int cGetLastError(sqlite3_vfs *v, int n, char *o) { (void)v; return parent->xGetLastError(parent, n, o); }
static int cCurrentTimeInt64(sqlite3_vfs *v, sqlite3_int64 *t) { (void)v; return parent->xCurrentTimeInt64(parent, t); }

static sqlite3_vfs vfs;
static pthread_mutex_t registering = PTHREAD_MUTEX_INITIALIZER;

int pushemu_coalescing_vfs_register(const char *name) {
    pthread_mutex_lock(&registering);
    int rc = SQLITE_OK;
    if (!vfs.zName) {
        parent = sqlite3_vfs_find(0);
        char *copy = parent && parent->iVersion >= 2 ? strdup(name) : 0;   /* registered for the process's life */
        if (!copy) {
            rc = SQLITE_ERROR;
        } else {
            vfs.iVersion = 2;
            vfs.szOsFile = (int)sizeof(CFile) + parent->szOsFile;
            vfs.mxPathname = parent->mxPathname;
            vfs.xOpen = cOpen; vfs.xDelete = cDelete; vfs.xAccess = cAccess; vfs.xFullPathname = cFullPathname;
            vfs.xDlOpen = cDlOpen; vfs.xDlError = cDlError; vfs.xDlSym = cDlSym; vfs.xDlClose = cDlClose;
            vfs.xRandomness = cRandomness; vfs.xSleep = cSleep; vfs.xCurrentTime = cCurrentTime;
            vfs.xGetLastError = cGetLastError; vfs.xCurrentTimeInt64 = cCurrentTimeInt64;
            vfs.zName = copy;
            rc = sqlite3_vfs_register(&vfs, 0);
            if (rc != SQLITE_OK) { vfs.zName = 0; free(copy); }
        }
    } else if (strcmp(vfs.zName, name) != 0) {
        rc = SQLITE_MISUSE;   /* one name per process */
    }
    pthread_mutex_unlock(&registering);
    return rc;
}
