/* SPDX-License-Identifier: Apache-2.0 */
/* mem_alloc.c - gw_mem_alloc: host memory gpuwire allocates and registers,
 * shared with local peers (mem/shm.c) so that the intra-host transport
 * moves small operations into it by plain copies. */
#include "api/api.h"

gw_status_t gw_mem_alloc(gw_context_t *ctx, size_t len, unsigned access, void **addr, gw_mem_t **out)
{
    GW_API_LOCK(ctx);
    if (out)
        *out = NULL;
    if (addr)
        *addr = NULL;
    if (!ctx || !out || !addr)
        return gw_api_invalid(ctx ? &ctx->core : NULL, "gw_mem_alloc", "%s is NULL", !addr ? "addr" : "mem");
    gw_core_t *core = &ctx->core;
    if (len == 0)
        return gw_err(core, GW_ERR_INVALID, "gw_mem_alloc: length 0");
    if (access & ~(unsigned)(GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE))
        return gw_err(core, GW_ERR_INVALID, "gw_mem_alloc(len=%zu): unknown access flags 0x%x", len, access);
    void *p = NULL;
    int fd = -1;
    gw_status_t st = gw_shm_alloc(core, len, &p, &fd);
    if (st != GW_OK)
        return st;
    st = gw_mem_reg_shm(ctx, p, len, access, fd, out);
    if (st != GW_OK) {
        gw_shm_free(p, len, fd);
        return st;
    }
    *addr = p;
    return GW_OK;
}
