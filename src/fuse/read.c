/*
 * The read path: opening a file (a slice of a shard, a whole shard served
 * as a file, or a snapshot of a control file), reading it, releasing it.
 * A slice's reads are answered with the source file's descriptor so the
 * kernel can splice; only the bytes a format adds come from memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "fs.h"

void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct sfs_error err = { 0 };
	const struct sfs_view_node *n;
	struct handle *h;
	const char *path;
	uint64_t size;
	int64_t mtime;
	uint32_t node;
	int rc;

	fs_readahead_once(fs);
	h = handle_new(fs, H_DATA);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (control_is(ino)) {
		if ((fi->flags & O_ACCMODE) != O_RDONLY &&
		    ino != FS_INO_EPOCH) {
			handle_free(fs, h);
			fuse_reply_err(req, EROFS);
			return;
		}
		h->kind = H_CONTROL;
		h->buf = control_text(fs, ino);
		h->len = h->buf ? strlen(h->buf) : 0;
		fi->direct_io = 1;
		fi->fh = (uintptr_t)h;
		if (!h->buf)
			rc = ENOMEM;
		else
			rc = fuse_reply_open(req, fi) == -ENOENT ? -1 : 0;
		if (rc) {
			if (rc > 0)
				fuse_reply_err(req, rc);
			handle_free(fs, h);
		}
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		handle_free(fs, h);
		fuse_reply_err(req, EROFS);
		return;
	}
	h->vr = view_get(fs, ino, &node);
	if (!h->vr) {
		handle_free(fs, h);
		fuse_reply_err(req, ESTALE);
		return;
	}
	n = &h->vr->v->nodes[node];
	if (n->kind != SFS_NODE_FILE) {
		handle_free(fs, h);
		fuse_reply_err(req, n->kind == SFS_NODE_DIR ? EISDIR : ELOOP);
		return;
	}
	sfs_view_source(h->vr->v, n, &path, &size, &mtime);
	h->src_size = size;
	h->src_mtime = mtime;
	h->src = fdcache_get(&fs->fds, path, size, mtime, false, &rc, &err);
	if (!rc)
		rc = sfs_view_slice(h->vr->v, n, h->src->fd, &h->slice, &err);
	if (rc) {
		fs_log(fs, LOG_ERR, "%s", err.msg);
		atomic_fetch_add(&fs->errors, 1);
		handle_free(fs, h);
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
		return;
	}
	atomic_fetch_add(&fs->opens, 1);
	fi->keep_cache = 1;
	fi->fh = (uintptr_t)h;
	prefetch_after(fs->prefetch, h->vr, node);
	if (fuse_reply_open(req, fi) == -ENOENT)
		handle_free(fs, h);
}

/*
 * A reply too large for the splice pipe: read it into memory.  (libfuse's
 * own fallback for fd buffers does the same, but allocates and frees the
 * whole reply per request, which costs more than this copy: see the read
 * path in docs/benchmarks.md.)
 */
static void reply_copy(fuse_req_t req, struct fs *fs, const struct handle *h,
		       uint64_t pos, size_t len)
{
	char *buf = malloc(len);
	ssize_t got;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	got = sfs_slice_pread(h->slice, h->src->fd, buf, len, pos);
	if (got < 0) {
		atomic_fetch_add(&fs->errors, 1);
		fs_log(fs, LOG_ERR,
		       "%s: read failed at byte %llu: the shard is shorter than indexed; rebuild the index with shardfs-index",
		       h->src->path, (unsigned long long)pos);
		fuse_reply_err(req, EIO);
	} else {
		fuse_reply_buf(req, buf, (size_t)got);
	}
	free(buf);
}

void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
	     struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	struct fs *fs = fs_of(req);
	const struct sfs_slice *s = h->slice;
	struct sfs_error err = { 0 };
	struct fuse_bufvec *bv;
	uint64_t pos = (uint64_t)off, end;
	size_t i, n = 0, first;
	bool owned = false;

	(void)ino;
	if (h->kind == H_CONTROL) {
		size_t o = (size_t)off < h->len ? (size_t)off : h->len;
		size_t len = size < h->len - o ? size : h->len - o;
		/* The kernel may release the handle as soon as it has the
		 * reply, before fuse_reply_buf returns: reply from a copy. */
		char *chunk = malloc(len + 1);

		if (!chunk) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(chunk, h->buf + o, len);
		fuse_reply_buf(req, chunk, len);
		free(chunk);
		return;
	}
	if (off < 0 || pos >= s->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* A shard truncated or rewritten under an open file would splice
	 * short or other bytes: check before every read. */
	if (fdcache_check(h->src->fd, h->src->path, h->src_size, h->src_mtime,
			  &err)) {
		atomic_fetch_add(&fs->errors, 1);
		if (!atomic_exchange(&h->logged, true))
			fs_log(fs, LOG_ERR, "%s", err.msg);
		fuse_reply_err(req, EIO);
		return;
	}
	end = s->size - pos < size ? s->size : pos + size;
	atomic_fetch_add(&fs->reads, 1);
	atomic_fetch_add(&fs->bytes, end - pos);
	first = sfs_slice_find(s, pos);
	for (i = first; i < s->nextents && s->extents[i].pos < end; i++) {
		n++;
		owned = owned || s->extents[i].owned;
	}
	/* The kernel may release the handle, and free the slice's own bytes
	 * (a Parquet footer, re-encoded pages), as soon as it has the reply,
	 * before fuse_reply_data returns: reply from a copy of those. */
	if (owned || end - pos > fs->splice_max) {
		reply_copy(req, fs, h, pos, (size_t)(end - pos));
		return;
	}
	bv = malloc(sizeof(*bv) + n * sizeof(bv->buf[0]));
	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	bv->count = n;
	bv->idx = 0;
	bv->off = 0;
	for (i = 0; i < n; i++) {
		const struct sfs_extent *x = &s->extents[first + i];
		uint64_t a = pos > x->pos ? pos - x->pos : 0;
		uint64_t b = end - x->pos < x->len ? end - x->pos : x->len;
		struct fuse_buf *fb = &bv->buf[i];

		memset(fb, 0, sizeof(*fb));
		fb->size = (size_t)(b - a);
		if (x->mem) {
			fb->mem = (char *)x->mem + a;
		} else {
			fb->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
				    FUSE_BUF_FD_RETRY;
			fb->fd = h->src->fd;
			fb->pos = (off_t)(x->src + a);
		}
	}
	fuse_reply_data(req, bv, FUSE_BUF_SPLICE_MOVE);
	free(bv);
}

void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	handle_free(fs_of(req), (struct handle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}
