#include <stdarg.h>
#include <stdio.h>

#include "shardfs/error.h"

int sfs_errorf(struct sfs_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

void sfs_error_clear(struct sfs_error *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}
