/*
 * What every part of the daemon needs from the process it runs in, and
 * nothing of FUSE's requests: its log, the start of its threads, and the
 * mount's read-ahead, set once the kernel has set its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "fs.h"

void fs_log(struct fs *fs, int prio, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (fs->foreground) {
		/* one line, whole, whichever threads log at once */
		flockfile(stderr);
		fputs("shardfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		funlockfile(stderr);
	} else {
		vsyslog(prio, fmt, ap);
	}
	va_end(ap);
}

int fs_thread_start(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	sigset_t block, old;
	int rc;

	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	rc = pthread_create(tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}

void fs_readahead_once(struct fs *fs)
{
	size_t n = strlen(fs->readahead_kb);
	int fd;

	if (!atomic_load(&fs->readahead_pending) ||
	    !atomic_exchange(&fs->readahead_pending, false))
		return;
	fd = open(fs->readahead_path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, fs->readahead_kb, n) != (ssize_t)n)
		fs_log(fs, LOG_INFO,
		       "kept the kernel's read-ahead (%s: %s); reads arrive in smaller requests",
		       fs->readahead_path, strerror(errno));
	if (fd >= 0)
		close(fd);
}
