/*
 * Error messages for people.
 *
 * Every core function that can fail returns 0 or a negative errno and, when
 * it is given a struct sfs_error, leaves there one sentence that names the
 * thing that is wrong, where (file, byte offset, option), and what to do.
 * The caller decides whether to print it.  A NULL error pointer is allowed
 * everywhere and means "the caller only wants the code".
 */
#ifndef SHARDFS_ERROR_H
#define SHARDFS_ERROR_H

#define SFS_ERROR_MAX 1024

struct sfs_error {
	int code; /* the negative errno last set, 0 if none */
	char msg[SFS_ERROR_MAX];
};

/*
 * Format a message into err (if not NULL) and return code, which must be a
 * negative errno, so that "return sfs_errorf(err, -EINVAL, ...)" reads as
 * one statement.  Messages longer than SFS_ERROR_MAX are truncated.
 */
int sfs_errorf(struct sfs_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Clear err (if not NULL). */
void sfs_error_clear(struct sfs_error *err);

#endif
