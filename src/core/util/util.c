/* Chores written once: see include/shardfs/util.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
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

/* The capacity sfs_grow gives an array of capacity cap that must hold
 * need (> cap) elements. */
static size_t grown_cap(size_t cap, size_t need)
{
	size_t n = cap > SIZE_MAX / 2 ? SIZE_MAX : cap ? 2 * cap : 8;

	return n < need ? need : n;
}

uint64_t sfs_grow_cost(size_t cap, size_t need, size_t size, uint64_t max)
{
	size_t n;

	if (need <= cap)
		return 0;
	n = grown_cap(cap, need);
	if (size && n > max / size)
		return UINT64_MAX;
	return (uint64_t)(n - cap) * size + (cap ? 0 : SFS_MALLOC_HEADER);
}

int sfs_grow(void *arrayp, size_t *cap, size_t need, size_t size)
{
	void *array, *grown;
	size_t n;

	if (need <= *cap)
		return 0;
	n = grown_cap(*cap, need);
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

/* The length of the valid UTF-8 character at p (at most n bytes), or 0:
 * no overlong form, no surrogate, nothing past U+10FFFF. */
static size_t utf8_char(const unsigned char *p, size_t n)
{
	size_t len, i;
	uint32_t c;

	if (p[0] < 0x80)
		return 1;
	if (p[0] < 0xc2 || p[0] > 0xf4)
		return 0;
	len = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	if (n < len)
		return 0;
	c = p[0] & (0x7f >> len);
	for (i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	return len;
}

char *sfs_name_escape(const char *name, bool always)
{
	const unsigned char *p = (const unsigned char *)name;
	size_t n = strlen(name), i, k, at = 0;
	bool escape = always;
	char *out;

	for (i = 0; i < n && !escape; i += k ? k : 1)
		escape = !(k = utf8_char(p + i, n - i));
	out = malloc(escape ? 3 * n + 1 : n + 1);
	if (!out || !escape)
		return out ? memcpy(out, name, n + 1) : NULL;
	for (i = 0; i < n; i += k) {
		k = utf8_char(p + i, n - i);
		if (k && p[i] != '%') {
			memcpy(out + at, p + i, k);
			at += k;
			continue;
		}
		at += (size_t)sprintf(out + at, "%%%02X", p[i]);
		k = 1;
	}
	out[at] = '\0';
	return out;
}

int sfs_open_unlinked(const char *dir, const char *stem, mode_t mode,
		      bool *linkable)
{
	char path[PATH_MAX];
	int fd, rc;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
	*linkable = fd >= 0;
	if (fd >= 0)
		return fd;
	if ((size_t)snprintf(path, sizeof(path), "%s/.%s-XXXXXX", dir, stem) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (unlink(path) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

bool sfs_path_ok(const char *path)
{
	const char *p = path;

	if (!*path || *path == '/' || strlen(path) >= PATH_MAX)
		return false;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!slash)
			break;
		p = slash + 1;
		if (!*p)
			return false;
	}
	return true;
}

int sfs_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void sfs_heap_give_back(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}
