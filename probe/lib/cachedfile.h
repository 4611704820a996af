/* A file whose pages are all in the page cache, for the benchmarks that map
 * one (mem.touch, mem.mmap backing=memfd|tmpfile): a memfd (shmem) or an
 * unnamed O_TMPFILE file in $TMPDIR (or /tmp). Neither has a name, so
 * nothing is left behind when the probe is killed. */
#ifndef OPCOST_CACHEDFILE_H
#define OPCOST_CACHEDFILE_H

#include <stddef.h>

#define CACHEDFILE_CHOICES {"memfd", "tmpfile", NULL}
#define CACHEDFILE_HELP "memfd: shmem object; tmpfile: unnamed O_TMPFILE file in $TMPDIR or /tmp"

/* An fd of `len` bytes (a multiple of the page size), every page written,
 * for backing "memfd" or "tmpfile". -1 with the reason in err and errno set
 * (EOPNOTSUPP, EISDIR or ENOSYS: this machine cannot make one). */
int cachedfile_open(const char *backing, size_t len, char *err, size_t errlen);

#endif
