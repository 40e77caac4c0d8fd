/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c.h - CRC32C (Castagnoli, the iSCSI/ext4/SCTP checksum; RFC 3720
 * appendix B.4) of host memory (core layer).
 *
 * gw_crc32c() uses the CPU's crc32 instruction where the CPU has it
 * (x86-64 with SSE4.2, checked once at run time), running three
 * independent streams over a block and joining their remainders, so that
 * the instruction's latency (3 cycles) is hidden; elsewhere a
 * slicing-by-8 table does it.  Both are reachable by name for tests and
 * benchmarks.  The value is the standard one: gw_crc32c(0, "123456789", 9)
 * is 0xe3069283.  To continue a checksum over a further piece, pass the
 * previous result as crc. */
#ifndef GW_CORE_CRC32C_H
#define GW_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t gw_crc32c(uint32_t crc, const void *buf, size_t len);
/* the table path (any CPU) */
uint32_t gw_crc32c_table(uint32_t crc, const void *buf, size_t len);
/* the instruction path; only where gw_crc32c_hw_available() */
uint32_t gw_crc32c_hw(uint32_t crc, const void *buf, size_t len);
/* 1 when this CPU has the instruction (and this build can use it) */
int gw_crc32c_hw_available(void);
/* the CRC32C of A followed by B from crc1 = gw_crc32c(0, A, .), crc2 =
 * gw_crc32c(0, B, .) and B's length (as zlib's crc32_combine) */
uint32_t gw_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
/* "sse4.2 crc32, 3 streams" or "table (slicing-by-8)": what gw_crc32c runs */
const char *gw_crc32c_impl(void);

#endif
