/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_gpu.c - GPU memory over tcp through the staging path, two processes,
 * against the fake CUDA driver (tests/fakecuda): GPU->GPU and host<->GPU
 * put, get, notification and send/recv of several sizes, payload verified
 * by copying back from "device" memory. */
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"
#include "fc_dev.h"

#define REGION (12u << 20)

static gwt_chan_t pch, cch;

static int server(void *arg)
{
    (void)arg;
    const gw_cuda_t *cu = fc_cuda(0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_listener_t *l;
    gw_ep_t *ep = gwt_listen_accept(ctx, &cch, &l);
    void *region = fc_dev_alloc(cu, REGION);
    fc_dev_fill(cu, region, REGION, 11);
    gw_mem_t *mem;
    REQUIRE_OK(gw_mem_reg(ctx, region, REGION, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(mem, &mi);
    CHECK(mi.type == GW_MEM_CUDA && mi.cuda_device == 0);
    CHECK(strstr(mi.path, "tcp: staged") != NULL);
    fprintf(stderr, "server region: %s (%s)\n", mi.path, mi.pci_bus_id);
    gwt_send_rkey(ep, mem, 1);
    gw_request_t *r;

    uint64_t v;
    REQUIRE_OK(gw_notify_wait(ep, 20000, &v)); /* after the GPU->GPU put of 9 MiB at 0 */
    CHECK(v == 1);
    CHECK(fc_dev_verify(cu, region, 9u << 20, 21) == -1);
    REQUIRE_OK(gw_notify_wait(ep, 20000, &v)); /* after a host->GPU put of 4097 bytes at 10 MiB */
    CHECK(v == 2);
    CHECK(fc_dev_verify(cu, (uint8_t *)region + (10u << 20), 4097, 22) == -1);

    /* receives into GPU memory: rendezvous (3 MiB) and eager (1000 B, posted late) */
    void *rbuf = fc_dev_alloc(cu, 4u << 20);
    gw_mem_t *rmem;
    REQUIRE_OK(gw_mem_reg(ctx, rbuf, 4u << 20, GW_ACCESS_LOCAL, &rmem));
    REQUIRE_OK(gw_recv(ep, rbuf, 4u << 20, rmem, 3, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_info_t ri = {.size = sizeof(ri)};
    gw_request_info(r, &ri);
    CHECK(ri.length == (3u << 20));
    CHECK(fc_dev_verify(cu, rbuf, 3u << 20, 23) == -1);
    gw_request_free(r);
    usleep(100000); /* let the eager message arrive before its receive */
    gw_progress(ctx);
    REQUIRE_OK(gw_recv(ep, rbuf, 4u << 20, rmem, 4, ~0ull, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    CHECK(fc_dev_verify(cu, rbuf, 1000, 24) == -1);
    gw_request_free(r);

    char done[8];
    REQUIRE_OK(gw_recv(ep, done, sizeof(done), NULL, 99, ~0ull, &r));
    REQUIRE_OK(gw_request_wait(r, 30000));
    gw_request_free(r);
    gw_ep_close(ep, 1000);
    gw_listener_destroy(l);
    CHECK_ST(gw_mem_dereg(rmem), GW_OK);
    CHECK_ST(gw_mem_dereg(mem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("fakecuda_tcp_gpu server");
}

int main(void)
{
    gwt_chan_pair(&pch, &cch);
    int pid = gwt_spawn(server, NULL);
    const gw_cuda_t *cu = fc_cuda(0);
    char addr[80];
    REQUIRE(gwt_chan_recv(&pch, addr, sizeof(addr), 10000) > 0);
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    gw_ep_t *ep;
    REQUIRE_OK(gw_connect(ctx, addr, &ep));
    gw_request_t *r;
    uint64_t base;
    gw_rkey_t *rk = gwt_recv_rkey(ep, 1, &base);

    void *src = fc_dev_alloc(cu, REGION);
    gw_mem_t *smem;
    REQUIRE_OK(gw_mem_reg(ctx, src, REGION, GW_ACCESS_LOCAL, &smem));

    /* get: GPU region -> local GPU buffer, sizes 1, 64K+3, 5 MiB (striped) */
    size_t gsz[] = {1, 65539, 5u << 20};
    for (size_t i = 0; i < 3; i++) {
        REQUIRE_OK(gw_get(ep, src, gsz[i], smem, base, rk, &r));
        CHECK_ST(gw_request_wait(r, 20000), GW_OK);
        gw_request_free(r);
        CHECK(fc_dev_verify(cu, src, gsz[i], 11) == -1);
    }
    /* get into host memory */
    uint8_t *host = malloc(REGION);
    REQUIRE_OK(gw_get(ep, host, 2u << 20, NULL, base, rk, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    CHECK(gwt_verify(host, 2u << 20, 11) == -1);

    /* GPU -> GPU put of 9 MiB, then a notification */
    fc_dev_fill(cu, src, 9u << 20, 21);
    REQUIRE_OK(gw_put_notify(ep, src, 9u << 20, smem, base, rk, 1, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    /* host -> GPU */
    gwt_fill(host, 4097, 22);
    REQUIRE_OK(gw_put_notify(ep, host, 4097, NULL, base + (10u << 20), rk, 2, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);

    /* sends from GPU memory */
    fc_dev_fill(cu, src, 3u << 20, 23);
    REQUIRE_OK(gw_send(ep, src, 3u << 20, smem, 3, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    fc_dev_fill(cu, src, 1000, 24);
    REQUIRE_OK(gw_send(ep, src, 1000, smem, 4, &r));
    CHECK_ST(gw_request_wait(r, 20000), GW_OK);
    gw_request_free(r);
    REQUIRE_OK(gw_send(ep, "done", 5, NULL, 99, &r));
    CHECK_ST(gw_request_wait(r, 10000), GW_OK);
    gw_request_free(r);

    gw_rkey_destroy(rk);
    CHECK_ST(gw_ep_close(ep, 1000), GW_OK);
    CHECK_ST(gw_mem_dereg(smem), GW_OK);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    free(host);
    CHECK(gwt_wait(pid, 90) == 0);
    return gwt_done("fakecuda_tcp_gpu");
}
