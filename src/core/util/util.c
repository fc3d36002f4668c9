/* Chores written once: see include/shardfs/util.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shardfs/util.h"

ssize_t sfs_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t got = pread(fd, (char *)buf + done, len - done,
				    (off_t)(off + done));

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		done += (size_t)got;
	}
	return (ssize_t)done;
}

int sfs_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sfs_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int sfs_grow(void *arrayp, size_t *cap, size_t need, size_t size)
{
	void *array, *grown;
	size_t n;

	if (need <= *cap)
		return 0;
	n = *cap > SIZE_MAX / 2 ? SIZE_MAX : *cap ? 2 * *cap : 8;
	if (n < need)
		n = need;
	if (size && n > SIZE_MAX / size)
		return -ENOMEM;
	/* the caller's pointer is read and written as bytes: arrays of any
	 * element type pass through one function */
	memcpy(&array, arrayp, sizeof(array));
	grown = realloc(array, n * size + !size);
	if (!grown)
		return -ENOMEM;
	memcpy(arrayp, &grown, sizeof(grown));
	*cap = n;
	return 0;
}
