/* Chores written once: see include/shardfs/util.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
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

/* tries of a temporary name before giving up (each one found taken) */
#define BENEATH_TRIES 64

int sfs_write_beneath(int dirfd, const char *name, const void *buf, size_t len,
		      mode_t mode)
{
	char tmp[512];
	int fd = -1, rc, i;

	if (strlen(name) > 200 || strchr(name, '/'))
		return -EINVAL;
	for (i = 0; i < BENEATH_TRIES && fd < 0; i++) {
		unsigned long long r = 0;
		struct timespec ts;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			r = (unsigned long long)ts.tv_nsec * 2654435761u ^
			    (unsigned long long)getpid() << 20 ^ (unsigned)i;
		}
		snprintf(tmp, sizeof(tmp), ".%s.%06llx", name, r & 0xffffff);
		fd = openat(dirfd, tmp,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC,
			    mode);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	rc = sfs_write_full(fd, buf, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
	if (rc)
		unlinkat(dirfd, tmp, 0);
	return rc;
}
