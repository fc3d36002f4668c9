/*
 * libFuzzer harness: the JSON that crosses processes and may come from
 * anywhere a file can: a mount's status (MNT/.shardfs/status, read by the
 * auditor) and an audit report (shardfs-check view --emit, read by merge).
 * Refused or accepted, never a crash; what is accepted holds valid
 * options.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shardfs/audit.h"
#include "shardfs/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_opts(const struct sfs_plan_opts *o)
{
	if (o->world < 1 || o->workers < 1 || o->replicas < 1 || o->batch < 1 ||
	    sfs_plan_opts_check(o, NULL))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfs_status st;
	struct sfs_audit a = { 0 };
	struct sfs_index *idx = NULL;
	char path[64];
	size_t i;
	int fd;

	if (!sfs_status_read((const char *)data, size, "status", &st, NULL)) {
		check_opts(&st.plan);
		sfs_status_clear(&st);
	}
	fd = memfd_create("report", 0);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (!sfs_audit_read(&a, path, &idx, NULL))
			for (i = 0; i < a.nmounts; i++)
				check_opts(&a.mounts[i].opts);
	}
	close(fd);
	sfs_audit_clear(&a);
	sfs_index_free(idx);
	return 0;
}
