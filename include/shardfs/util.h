/*
 * Chores every module needs, written once (as git's wrapper.c does):
 * reading and writing a whole buffer through a file descriptor, and
 * growing an array with one overflow check.
 *
 * Each returns 0 (or a byte count) or a negative errno, and never prints;
 * the caller names the file and the byte in its own message.  A failed
 * call leaves its array or buffer as it was.
 */
#ifndef SHARDFS_UTIL_H
#define SHARDFS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * pread until len bytes are read or the file ends, retrying EINTR.
 * Returns the bytes read (less than len only at the end of the file), or
 * -errno of the failing pread.
 */
ssize_t sfs_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* write all len bytes, retrying EINTR and short writes: 0 or -errno. */
int sfs_write_full(int fd, const void *buf, size_t len);

/* pwrite all len bytes at off, likewise: 0 or -errno. */
int sfs_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

/*
 * Replace the file called name in the directory open as dirfd with len
 * bytes of buf, atomically and without following a symlink, for a
 * directory another user may write: the bytes go to a new temporary name
 * (".NAME.XXXXXX", created with O_CREAT | O_EXCL | O_NOFOLLOW, another one
 * tried when something is planted there), are written in full and
 * fsync'ed, and the temporary is renamed onto name (a symlink planted at
 * name is replaced, never followed).  mode: of the new file.  Returns 0,
 * or -errno of the failing call (the temporary is removed then).
 */
int sfs_write_beneath(int dirfd, const char *name, const void *buf, size_t len,
		      mode_t mode);

/*
 * A file name as a JSON string may hold it (JSON text is UTF-8; jansson
 * refuses anything else): every byte of name that is not part of a valid
 * UTF-8 character written "%XX" (two upper-case hex digits), and every
 * '%' written "%25" when always is true or name needed an escape, so that
 * the bytes come back unambiguously (Python:
 * urllib.parse.unquote_to_bytes).  Returns a heap string, or NULL without
 * memory.
 */
char *sfs_name_escape(const char *name, bool always);

/*
 * SFS_PARTITION_POINT(i, lo, hi, pred): the first index in [lo, hi) for
 * which pred, an expression of the size_t i, is false, where pred holds
 * for every index before that one and for none after it; hi when it holds
 * for all.  The project's one binary search, over any sorted table:
 * "key(i) <= x" gives the first key past x (minus one: the last at or
 * before it), "strcmp(name(i), x) < 0" where x is or would be.  i must
 * not name a variable of the caller (-Wshadow).
 */
#define SFS_PARTITION_POINT(i, lo, hi, pred)                                   \
	__extension__({                                                        \
		size_t sfs_pp_lo_ = (lo), sfs_pp_hi_ = (hi);                   \
		while (sfs_pp_lo_ < sfs_pp_hi_) {                              \
			size_t i = sfs_pp_lo_ + (sfs_pp_hi_ - sfs_pp_lo_) / 2; \
			if (pred)                                              \
				sfs_pp_lo_ = i + 1;                            \
			else                                                   \
				sfs_pp_hi_ = i;                                \
		}                                                              \
		sfs_pp_lo_;                                                    \
	})

/*
 * The struct of type whose field member is at ptr: a struct that holds a
 * lower layer's part (as struct sfs_mix holds an index's joiner) found
 * again from that part.
 */
#define SFS_CONTAINER_OF(ptr, type, member) \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/*
 * Make *arrayp (a pointer to an array of elements of size bytes, possibly
 * NULL) hold at least need elements: when *cap is smaller, the array is
 * reallocated to the larger of need and twice *cap (at least 8) and *cap
 * set.  Returns 0, or -ENOMEM when the memory cannot be had or need × size
 * does not fit a size_t; the array and *cap are then unchanged.
 */
int sfs_grow(void *arrayp, size_t *cap, size_t need, size_t size);

/* sfs_grow for an array variable and its size_t capacity. */
#define SFS_GROW(array, cap, need) \
	sfs_grow(&(array), &(cap), (need), sizeof(*(array)))

/* qsort's comparison of two uint64_t, ascending. */
int sfs_cmp_u64(const void *a, const void *b);

/*
 * Give the free pages of the heap back to the system (glibc's
 * malloc_trim; nothing with another C library): after a burst of large
 * allocations freed (a view build's decoded pages), which the allocator
 * would otherwise keep resident, spread through its arenas.
 */
void sfs_heap_give_back(void);

/* What malloc takes beside each block it gives: charged with it. */
#define SFS_MALLOC_HEADER 16

/*
 * The bytes sfs_grow(arrayp, &cap, need, size) allocates anew, for a
 * decoder that charges them to its budget first: the capacity it grows
 * to less cap, times size, and SFS_MALLOC_HEADER for a first block; 0
 * when cap holds need, UINT64_MAX when the capacity it grows to holds
 * more than max bytes.
 */
uint64_t sfs_grow_cost(size_t cap, size_t need, size_t size, uint64_t max);

/*
 * Open name in the directory open as dirfd, for a directory another user
 * may write (the source, an emptyDir): no component may be a symlink or
 * lead out of dirfd (openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS; on kernels before 5.6, openat with O_NOFOLLOW,
 * the last component only).  flags: open's (O_CLOEXEC is added); mode: of
 * a file O_CREAT makes.  Returns the descriptor, or -errno: -ELOOP for a
 * symlink on the way, -EXDEV for a path that leaves dirfd.
 */
int sfs_open_beneath(int dirfd, const char *name, int flags, mode_t mode);

/*
 * A new file of dir that no name holds, only the descriptor (read and
 * write): made without one (O_TMPFILE, mode mode, *linkable set: it may
 * be given one with linkat), or where the file system cannot, a unique
 * name ("dir/.STEM-XXXXXX", mode 0600, O_EXCL: never a file or a symlink
 * planted there) unlinked at once.  Safe in a directory another user may write.
 * Returns the descriptor, or -errno of the failing call (-ENAMETOOLONG
 * for a dir too long to hold the name).
 */
int sfs_open_unlinked(const char *dir, const char *stem, mode_t mode,
		      bool *linkable);

/*
 * True when path is safe to join to a directory: relative, '/'-separated,
 * shorter than PATH_MAX, without empty, "." or ".." components (a path
 * from an index or a dataset's manifest, before it is opened).
 */
bool sfs_path_ok(const char *path);

#endif
