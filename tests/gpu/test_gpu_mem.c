/* SPDX-License-Identifier: Apache-2.0 */
/* test_gpu_mem - memory type detection (cuMemAlloc, VMM, partial ranges,
 * host kinds, mixed ranges), the staging engine's round trip, and the
 * dma-buf helper's answer on this machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_util.h"
#include "mem/mem.h"
#include "mem/staging.h"

static gw_core_t core;

static gw_status_t detect(void *addr, size_t len, gw_mem_t *m)
{
    memset(m, 0, sizeof(*m));
    m->core = &core;
    m->addr = addr;
    m->len = len;
    return gw_mem_detect(&core, m);
}

int main(void)
{
    const gw_cuda_t *cu = gpu_require(1);
    char err[256];
    REQUIRE_OK(gw_core_init(&core, err, sizeof(err)));
    char why[256];
    REQUIRE(gw_cuda_ctx_for_device(0, why, sizeof(why)) != NULL);
    gw_mem_t m;

    /* plain cuMemAlloc: whole, partial, one byte at the end */
    const size_t n = 3u << 20;
    CUdeviceptr d = 0;
    CU_CHECK(cu->cuMemAlloc(&d, n));
    CHECK_ST(detect((void *)(uintptr_t)d, n, &m), GW_OK);
    CHECK(m.type == GW_MEM_CUDA && m.cuda_device == 0 && strlen(m.pci_bus_id) >= 7);
    printf("cuMemAlloc: device %d pci %s\n", m.cuda_device, m.pci_bus_id);
    CHECK_ST(detect((void *)(uintptr_t)(d + 4097), 1000, &m), GW_OK);
    CHECK(m.type == GW_MEM_CUDA && m.cuda_device == 0);
    CHECK_ST(detect((void *)(uintptr_t)(d + n - 1), 1, &m), GW_OK);
    CHECK(m.type == GW_MEM_CUDA);

    /* host kinds */
    char *h = malloc(1 << 20);
    CHECK_ST(detect(h, 1 << 20, &m), GW_OK);
    CHECK(m.type == GW_MEM_HOST && m.cuda_device == -1 && m.pci_bus_id[0] == '\0');
    void *pinned = NULL;
    CU_CHECK(cu->cuMemHostAlloc(&pinned, 1 << 20, CU_MEMHOSTALLOC_PORTABLE));
    CHECK_ST(detect(pinned, 1 << 20, &m), GW_OK);
    CHECK(m.type == GW_MEM_HOST);

    /* VMM: three allocations mapped back to back, whole and straddling */
    if (cu->cuMemCreate) {
        CUmemGenericAllocationHandle hs[3];
        size_t total = 0;
        CUdeviceptr va = gpu_vmm_alloc(cu, 0, 2u << 20, 3, &total, hs);
        CHECK_ST(detect((void *)(uintptr_t)va, total, &m), GW_OK);
        CHECK(m.type == GW_MEM_CUDA && m.cuda_device == 0);
        CHECK_ST(detect((void *)(uintptr_t)(va + total / 3 - 10), total / 3 + 20, &m), GW_OK);
        CHECK(m.type == GW_MEM_CUDA);
        gpu_vmm_free(cu, va, total, 3, hs);
        printf("VMM: %zu bytes in 3 allocations detected\n", total);
    } else {
        printf("VMM: driver lacks cuMemCreate, not tested\n");
    }

    /* a range running off the end of a device allocation is refused */
    CUdeviceptr small = 0;
    CU_CHECK(cu->cuMemAlloc(&small, 4096));
    gw_status_t st = detect((void *)(uintptr_t)small, 1u << 30, &m);
    printf("overrun: %s: %s\n", gw_status_name(st), core.errbuf);
    CHECK(st == GW_ERR_INVALID || st == GW_ERR_CUDA);
    cu->cuMemFree(small);

    /* staging engine: host pattern -> GPU via H2D slots -> back via D2H slots */
    gw_staging_t *stg = NULL;
    REQUIRE_OK(gw_staging_create(&core, 0, 256 << 10, 3, &stg));
    size_t chunk = gw_staging_chunk(stg);
    char *src = malloc(n), *dst = malloc(n);
    gwt_fill(src, n, 42);
    memset(dst, 0, n);
    for (size_t off = 0; off < n;) {
        gw_stage_slot_t *s = gw_staging_acquire(stg);
        if (!s) {
            /* the ring is full: finish the oldest copy */
            continue;
        }
        size_t k = n - off < chunk ? n - off : chunk;
        memcpy(s->host, src + off, k);
        CHECK_ST(gw_staging_h2d(stg, s, (void *)(uintptr_t)(d + off), k), GW_OK);
        int t;
        while ((t = gw_staging_test(stg, s)) == 0)
            ;
        CHECK(t == 1);
        gw_staging_release(stg, s);
        off += k;
    }
    /* D2H with several slots in flight, consumed in order */
    gw_stage_slot_t *q[8];
    size_t qoff[8];
    int qn = 0;
    size_t off = 0, got = 0;
    while (got < n) {
        gw_stage_slot_t *s;
        while (off < n && qn < 8 && (s = gw_staging_acquire(stg)) != NULL) {
            size_t k = n - off < chunk ? n - off : chunk;
            CHECK_ST(gw_staging_d2h(stg, s, (void *)(uintptr_t)(d + off), k), GW_OK);
            q[qn] = s;
            qoff[qn++] = off;
            off += k;
        }
        REQUIRE(qn > 0);
        int t = gw_staging_test(stg, q[0]);
        REQUIRE(t >= 0);
        if (t == 1) {
            memcpy(dst + qoff[0], q[0]->host, q[0]->len);
            got += q[0]->len;
            gw_staging_release(stg, q[0]);
            memmove(q, q + 1, (size_t)(qn - 1) * sizeof(q[0]));
            memmove(qoff, qoff + 1, (size_t)(qn - 1) * sizeof(qoff[0]));
            qn--;
        }
    }
    long long bad = gwt_verify(dst, n, 42);
    CHECK(bad < 0);
    if (bad >= 0)
        fprintf(stderr, "staging round trip: first mismatch at %lld\n", bad);
    gw_staging_destroy(stg);

    /* the dma-buf helper says yes or why not */
    int fd = -1;
    uint64_t dboff = 0;
    st = gw_cuda_dmabuf_fd((void *)(uintptr_t)(d + 100), 5000, &fd, &dboff, why, sizeof(why));
    if (st == GW_OK) {
        CHECK(fd >= 0 && dboff == 100 % (uint64_t)sysconf(_SC_PAGESIZE));
        printf("dma-buf: fd %d, offset %llu\n", fd, (unsigned long long)dboff);
        close(fd);
    } else {
        printf("dma-buf: %s: %s\n", gw_status_name(st), why);
        CHECK(why[0] != '\0');
    }

    cu->cuMemFree(d);
    cu->cuMemFreeHost(pinned);
    free(h);
    free(src);
    free(dst);
    gw_core_fini(&core);
    return gwt_done("test_gpu_mem");
}
