#ifndef PUSHEMU_CSQLITE_SHIM_H
#define PUSHEMU_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_STATIC is a cast macro Swift cannot import. The caller keeps `v` alive until the
   statement is stepped (no copy). */
static inline int pushemu_sqlite3_bind_blob_static(sqlite3_stmt *s, int i, const void *v, int n) {
    return sqlite3_bind_blob(s, i, v, n, SQLITE_STATIC);
}

/* SQLITE_TRANSIENT likewise: SQLite copies `v` before returning. */
static inline int pushemu_sqlite3_bind_text_transient(sqlite3_stmt *s, int i, const char *v, int n) {
    return sqlite3_bind_text(s, i, v, n, SQLITE_TRANSIENT);
}
#endif
