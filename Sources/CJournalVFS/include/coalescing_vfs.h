#ifndef PUSHEMU_COALESCING_VFS_H
#define PUSHEMU_COALESCING_VFS_H

/* Registers (once) a SQLite VFS named `name` that wraps the default one and gathers a file's
   contiguous writes in memory, handing them to the default VFS as one write when the file is
   synced, read, sized, truncated, unlocked, closed or sent a file control, or when the next
   write is not contiguous or 120 KiB are pending. SQLite writes a WAL commit as two writes per
   page (a 24-byte frame header, then the page), and a checkpoint one write per page: with it a
   journal commit is one pwrite. Durability is unchanged: every byte reaches the file before the
   sync that makes it durable, and before SQLite publishes the frames in the WAL index (which it
   does only after syncing, with synchronous=FULL; so use this VFS only with FULL).
   Returns a SQLite result code. */
int pushemu_coalescing_vfs_register(const char *name);

#endif
