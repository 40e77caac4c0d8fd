/* SPDX-License-Identifier: Apache-2.0 */
/* shm.c - shared host memory for gw_mem_alloc (mem layer): a memfd mapped
 * MAP_SHARED.  Local peers (the intra transport) receive the fd over their
 * Unix socket and map the same pages, so a put into it is a plain copy by
 * the initiator: no system call, no message, no CPU of the owner. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem/mem.h"

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif

static size_t page_round(size_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return len ? (len + p - 1) / p * p : p;
}

gw_status_t gw_shm_alloc(gw_core_t *c, size_t len, void **addr, int *fd)
{
    size_t maplen = page_round(len);
    if (maplen < len)
        return gw_err(c, GW_ERR_INVALID, "gw_mem_alloc: length %zu is too large", len);
    int f = memfd_create("gpuwire-shm", MFD_CLOEXEC);
    if (f < 0)
        return gw_err(c, GW_ERR_SYSTEM, "gw_mem_alloc(len=%zu): memfd_create failed: %s", len, strerror(errno));
    if (ftruncate(f, (off_t)maplen) != 0) {
        int e = errno;
        close(f);
        return gw_err(c, e == ENOMEM || e == EFBIG || e == ENOSPC ? GW_ERR_NOMEM : GW_ERR_SYSTEM,
                      "gw_mem_alloc(len=%zu): sizing the memfd failed: %s", len, strerror(e));
    }
    /* The pages are allocated and mapped now, as registration pins them:
     * a page fault costs more than copying the page (tens of microseconds
     * on a VM), and a large put into fresh memory would pay one per page of
     * both mappings.  fallocate says so when memory is short; mmap would
     * not. */
    if (fallocate(f, 0, 0, (off_t)maplen) != 0 && errno != EOPNOTSUPP && errno != ENOSYS) {
        int e = errno;
        close(f);
        return gw_err(c, e == ENOMEM || e == ENOSPC ? GW_ERR_NOMEM : GW_ERR_SYSTEM,
                      "gw_mem_alloc(len=%zu): allocating the memfd's pages failed: %s", len, strerror(e));
    }
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, f, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(f);
        return gw_err(c, e == ENOMEM ? GW_ERR_NOMEM : GW_ERR_SYSTEM,
                      "gw_mem_alloc(len=%zu): mmap of the memfd failed: %s", len, strerror(e));
    }
    *addr = p;
    *fd = f;
    return GW_OK;
}

void gw_shm_free(void *addr, size_t len, int fd)
{
    if (addr)
        munmap(addr, page_round(len));
    if (fd >= 0)
        close(fd);
}

gw_status_t gw_shm_map(gw_core_t *c, int fd, size_t len, void **addr)
{
    /* the owner allocated the pages (gw_shm_alloc): map them all now */
    void *p = mmap(NULL, page_round(len), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return gw_err(c, errno == ENOMEM ? GW_ERR_NOMEM : GW_ERR_SYSTEM,
                      "intra: mapping a peer's shared memory (%zu bytes) failed: %s", len, strerror(errno));
    *addr = p;
    return GW_OK;
}

void gw_shm_unmap(void *addr, size_t len)
{
    if (addr)
        munmap(addr, page_round(len));
}
