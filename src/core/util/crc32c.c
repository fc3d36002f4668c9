#include <pthread.h>

#include "shardfs/crc32c.h"

/*
 * Slicing-by-8 tables, built once on first use (cheaper to read and check
 * than 8 KiB of literals) and read-only after that.
 */

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ (0x82F63B78U & (0U - (c & 1)));
		table[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			table[j][i] = (table[j - 1][i] >> 8) ^
				      table[0][table[j - 1][i] & 0xff];
}

uint32_t sfs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	pthread_once(&table_once, build_table);
	crc = ~crc;
	while (len >= 8) {
		uint32_t lo = crc ^
			      ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
			       (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
		crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
		      table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
		      table[3][p[4]] ^ table[2][p[5]] ^ table[1][p[6]] ^
		      table[0][p[7]];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

uint32_t sfs_crc32c_mask(uint32_t crc)
{
	return ((crc >> 15) | (crc << 17)) + 0xa282ead8U;
}

uint32_t sfs_crc32c_masked(const void *buf, size_t len)
{
	return sfs_crc32c_mask(sfs_crc32c(0, buf, len));
}
