/* SPDX-License-Identifier: Apache-2.0 */
/* test_crc_kernel.c - the CRC32C kernel (src/cuda/crc_kernel.cu) on a GPU:
 * its values equal the CPU's (core/crc32c.h) for entries of many lengths
 * (0 bytes to 9 MiB, odd ones included) at every alignment 0..15, one
 * launch for them all, and over pinned host memory too.  Exits 77 where no
 * CUDA driver or GPU is present. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "cuda/crc_kernel.h"
#include "cuda/cuda_wrap.h"
#include "harness.h"

#define BUF (10u << 20)

int main(void)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu || cu->device_count < 1)
        SKIP("no CUDA driver or GPU: %s", cu ? "no device" : why);
    REQUIRE(gw_cuda_ctx_for_device(0, why, sizeof(why)) != NULL);
    uint8_t *h = malloc(BUF);
    REQUIRE(h);
    uint64_t s = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < BUF; i++)
        h[i] = (uint8_t)gwt_xorshift(&s);
    CUdeviceptr d;
    REQUIRE(cu->cuMemAlloc(&d, BUF) == CUDA_SUCCESS);
    REQUIRE(cu->cuMemcpyHtoD(d, h, BUF) == CUDA_SUCCESS);
    static const uint64_t lens[] = {0, 1, 7, 8, 63, 64, 255, 256, 257, 1000, 4096, 4097, 65536, 65537, 1u << 20,
                                    (1u << 20) + 13, 9u << 20};
    enum { NL = sizeof(lens) / sizeof(lens[0]), NA = 16 };
    uint64_t addr[NL * NA], len[NL * NA];
    uint32_t crc[NL * NA], want[NL * NA];
    uint32_t n = 0;
    for (int a = 0; a < NA; a++)
        for (int k = 0; k < NL; k++) {
            uint64_t off = (uint64_t)a * 4099 % 65536 + a; /* alignments 0..15 over varied offsets */
            addr[n] = d + off;
            len[n] = lens[k];
            want[n] = gw_crc32c(0, h + off, lens[k]);
            n++;
        }
    REQUIRE_OK(gw_cuda_crc32c(0, addr, len, crc, n, why, sizeof(why)));
    int bad = 0;
    for (uint32_t i = 0; i < n; i++)
        if (crc[i] != want[i] && bad++ < 5)
            fprintf(stderr, "entry %u: %llu bytes at offset %llu: kernel 0x%08x, CPU 0x%08x\n", i,
                    (unsigned long long)len[i], (unsigned long long)(addr[i] - d), crc[i], want[i]);
    CHECK(bad == 0);
    /* pinned host memory, which the GPU reads over the bus */
    void *pinned;
    REQUIRE(cu->cuMemHostAlloc(&pinned, 1u << 20, 0) == CUDA_SUCCESS);
    memcpy(pinned, h, 1u << 20);
    uint64_t pa = (uint64_t)(uintptr_t)pinned + 3, pl = (1u << 20) - 3;
    uint32_t pc;
    REQUIRE_OK(gw_cuda_crc32c(0, &pa, &pl, &pc, 1, why, sizeof(why)));
    CHECK(pc == gw_crc32c(0, h + 3, pl));
    cu->cuMemFreeHost(pinned);
    cu->cuMemFree(d);
    free(h);
    fprintf(stderr, "%u entries checked against the CPU\n", n);
    return gwt_done("test_crc_kernel");
}
