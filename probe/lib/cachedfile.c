#include "cachedfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int open_backing(const char *backing, char *err, size_t errlen)
{
	if (strcmp(backing, "memfd") == 0) {
		int fd = memfd_create("opcost-file", MFD_CLOEXEC);
		if (fd < 0)
			snprintf(err, errlen, "memfd_create: %s", strerror(errno));
		return fd;
	}
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		snprintf(err, errlen, "backing=tmpfile: open(%s, O_TMPFILE): %s", dir, strerror(errno));
	return fd;
}

int cachedfile_open(const char *backing, size_t len, char *err, size_t errlen)
{
	int fd = open_backing(backing, err, errlen);
	if (fd < 0)
		return -1;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	char *buf = malloc(page);
	if (!buf) {
		close(fd);
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return -1;
	}
	memset(buf, 'o', page);
	for (size_t off = 0; off < len; off += page)
		if (pwrite(fd, buf, page, (off_t)off) != (ssize_t)page) {
			int e = errno;
			snprintf(err, errlen, "writing %zu bytes to the backing file: %s", len, strerror(e));
			free(buf);
			close(fd);
			errno = e == EOPNOTSUPP || e == EISDIR || e == ENOSYS ? EIO : e;
			return -1;
		}
	free(buf);
	return fd;
}
