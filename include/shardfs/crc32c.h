/*
 * CRC-32C (Castagnoli), as TFRecord framing uses it, and TFRecord's
 * "masked" form: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
 */
#ifndef SHARDFS_CRC32C_H
#define SHARDFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC-32C over buf; start with crc = 0. */
uint32_t sfs_crc32c(uint32_t crc, const void *buf, size_t len);

/* TFRecord's mask of a CRC-32C. */
uint32_t sfs_crc32c_mask(uint32_t crc);

/* TFRecord's masked CRC of buf. */
uint32_t sfs_crc32c_masked(const void *buf, size_t len);

#endif
