/* See tinyexe.h. */
#include "tinyexe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern const unsigned char tiny_exe[];
extern const unsigned long tiny_exe_len;

int tinyexe_open(char *path, size_t pathlen, char *err, size_t errlen)
{
	int w = memfd_create("opcost-tiny", MFD_CLOEXEC);
	if (w < 0) {
		snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		return -1;
	}
	size_t off = 0;
	while (off < tiny_exe_len) {
		ssize_t n = write(w, tiny_exe + off, tiny_exe_len - off);
		if (n <= 0) {
			snprintf(err, errlen, "write to memfd: %s", strerror(errno));
			close(w);
			return -1;
		}
		off += (size_t)n;
	}
	/* A file open for writing cannot be executed (ETXTBSY): keep only a
	 * read-only descriptor of the same memfd. */
	char wpath[64];
	snprintf(wpath, sizeof(wpath), "/proc/self/fd/%d", w);
	int r = open(wpath, O_RDONLY | O_CLOEXEC);
	int e = errno;
	close(w);
	if (r < 0) {
		snprintf(err, errlen, "reopen %s read-only: %s (is /proc mounted?)", wpath, strerror(e));
		return -1;
	}
	snprintf(path, pathlen, "/proc/self/fd/%d", r);
	return r;
}
