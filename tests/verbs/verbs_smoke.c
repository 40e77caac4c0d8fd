/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_smoke.c - the verbs transport opens on the machine's RDMA device
 * (in CI: Soft-RoCE in the qemu guest), registration limits are reported as
 * such, and dma-buf registration reports the device's refusal.
 *
 *   verbs_smoke [DEVICE]
 *
 * Skips (77) without an RDMA device. */
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "api/api.h"
#include "transport/verbs/verbs.h"

static gw_context_t *open_ctx(void)
{
    gw_context_t *ctx;
    REQUIRE_OK(gw_context_create(NULL, &ctx));
    return ctx;
}

int main(int argc, char **argv)
{
    gwt_require_rdma_device();
    if (argc > 1)
        setenv("GPUWIRE_IB_DEVICE", argv[1], 1);
    setenv("GPUWIRE_TRANSPORTS", "verbs", 1);

    gw_context_t *ctx = open_ctx();
    gw_transport_info_t ti = {.size = sizeof(ti)};
    REQUIRE_OK(gw_transport_at(ctx, GW_TL_VERBS, &ti));
    fprintf(stderr, "verbs: usable=%d: %s\n", ti.usable, ti.detail);
    REQUIRE(ti.usable);
    CHECK(strstr(ti.detail, "MTU") != NULL);
    gw_verbs_iface_t *vif = (gw_verbs_iface_t *)ctx->tl[GW_TL_VERBS];
    if (argc > 1)
        CHECK(!strncmp(vif->how, argv[1], strlen(argv[1])));
    CHECK(vif->port.ngids >= 1);
    if (vif->port.link_layer == GW_VERBS_LL_ETH)
        CHECK(vif->port.gids[0].v4); /* rxe: the IPv4-mapped RoCE v2 GID comes first */
    fprintf(stderr, "libibverbs said while loading (quieted): \"%s\"\n", vif->ibv->init_noise);

    /* registration and its path text */
    size_t len = 1u << 20;
    void *buf = malloc(len);
    gw_mem_t *m;
    REQUIRE_OK(gw_mem_reg(ctx, buf, len, GW_ACCESS_REMOTE_WRITE, &m));
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(m, &mi);
    fprintf(stderr, "region: %s\n", mi.path);
    CHECK(strstr(mi.path, "verbs: host memory registered") != NULL);
    CHECK_ST(gw_mem_dereg(m), GW_OK);

    /* dma-buf: rxe refuses (EOPNOTSUPP); the reason must say so */
    int fd = memfd_create("gw-not-a-dmabuf", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 1 << 16) == 0);
    struct ibv_mr *mr = NULL;
    gw_status_t st = gw_verbs_reg_dmabuf(vif, fd, 0, 1 << 16, 0,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, &mr);
    fprintf(stderr, "dma-buf: %s: %s\n", gw_status_name(st), gw_last_error(ctx));
    if (!strncmp(vif->port.dev, "rxe", 3)) {
        CHECK_ST(st, GW_ERR_UNSUPPORTED);
        CHECK(strstr(gw_last_error(ctx), "ibv_reg_dmabuf_mr") != NULL);
        CHECK(strstr(gw_last_error(ctx), "not supported") != NULL ||
              strstr(gw_last_error(ctx), "lacks") != NULL);
    } else {
        CHECK(st != GW_OK); /* a memfd is no dma-buf anywhere */
    }
    if (mr)
        vif->ibv->dereg_mr(mr);
    close(fd);

    /* locked-memory limit: a non-root process with a 64 KiB limit registering
     * 4 MiB gets GW_ERR_MEMLOCK naming the limit and the fix */
    if (geteuid() == 0) {
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit rl = {.rlim_cur = 64 << 10, .rlim_max = 64 << 10};
            if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
                fprintf(stderr, "cannot drop privileges: memlock check skipped\n");
                _exit(0);
            }
            void *b = malloc(4u << 20);
            gw_mem_t *mm = NULL;
            gw_status_t s = gw_mem_reg(ctx, b, 4u << 20, GW_ACCESS_REMOTE_READ, &mm);
            fprintf(stderr, "memlock: %s: %s\n", gw_status_name(s), gw_last_error(ctx));
            int ok = s == GW_ERR_MEMLOCK && strstr(gw_last_error(ctx), "64 KiB") &&
                     strstr(gw_last_error(ctx), "ulimit -l");
            _exit(ok ? 0 : 1);
        }
        int status;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    free(buf);
    CHECK_ST(gw_context_destroy(ctx), GW_OK);
    return gwt_done("verbs_smoke");
}
