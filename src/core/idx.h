/* SPDX-License-Identifier: Apache-2.0 */
/* idx.h - passes over uint32 index arrays (core layer): the lowest and
 * highest index of an array, alone or while the array is copied.  A batch
 * of page or entry indices is checked by its span (one pass) instead of
 * index by index, and where the array must be copied anyway (into pinned
 * memory a GPU kernel reads) the check rides on the copy. */
#ifndef GW_CORE_IDX_H
#define GW_CORE_IDX_H

#include <stddef.h>
#include <stdint.h>

/* The lowest and highest of p[0 .. n-1] into *lo and *hi; a NULL p reads as
 * 0 .. n-1, and n 0 gives 0 and 0. */
void gw_idx_span(const uint32_t *p, size_t n, uint32_t *lo, uint32_t *hi);

/* gw_idx_span of src while it is copied to dst (the two must not overlap;
 * src NULL copies nothing). */
void gw_idx_copy_span(uint32_t *dst, const uint32_t *src, size_t n, uint32_t *lo, uint32_t *hi);

/* 8-byte index arrays (gw_xfer_opts_t.index_type GW_INDEX_I64 or
 * GW_INDEX_U64): src[0 .. n-1] narrowed to uint32 into dst while their span
 * is taken, in one pass.  0 with *lo / *hi set, or 1 when some item is
 * outside 0 .. 2^32-1 (a negative int64 among them; dst then holds
 * garbage: gw_idx_wide_bad names the item). */
int gw_idx_narrow_span(uint32_t *dst, const uint64_t *src, size_t n, uint32_t *lo, uint32_t *hi);

/* The first item of src[0 .. n-1] outside 0 .. 2^32-1 (n when none); its
 * text ("-3 is negative", "4294967296 is above 4294967295"; signed: read
 * as int64) into buf. */
size_t gw_idx_wide_bad(const uint64_t *src, size_t n, int is_signed, char *buf, size_t len);

#endif
