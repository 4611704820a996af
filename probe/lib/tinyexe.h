/* The tiny static program (probe/tiny.S, embedded by the Makefile) in a
 * memfd: no file on disk, nothing to ship, gone with the probe. */
#ifndef OPCOST_TINYEXE_H
#define OPCOST_TINYEXE_H

#include <stddef.h>

/* A read-only, close-on-exec fd of the program, and its /proc/self/fd path
 * in `path`; -1 with the reason in err (then the operation is unsupported). */
int tinyexe_open(char *path, size_t pathlen, char *err, size_t errlen);

#endif
