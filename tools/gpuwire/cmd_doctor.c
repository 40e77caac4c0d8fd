/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_doctor.c - `gpuwire doctor`: every GPUDirect RDMA requirement, one
 * check each, with the evidence and a one-line fix (checks: src/diag/doctor.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/settings.h"
#include "cuda/cuda_wrap.h"
#include "gpuwire.h"
#include "subcommands.h"
#include "diag/doctor.h"

/* ---- the live test --------------------------------------------------------
 * For one NIC port and the GPU nearest it: a context restricted to the verbs
 * transport on that port registers a buffer in GPU memory; a second context
 * connects to the first over loopback, puts a pattern into the GPU buffer,
 * gets it back, and the pattern is also read straight from the GPU with
 * cuMemcpyDtoH.  It passes only when the region was registered for
 * GPUDirect (not host staging) and every byte arrived. */

#define LIVE_BYTES (4u << 20)

typedef struct live_srv {
    gw_context_t *ctx;
    gw_listener_t *l;
    gw_ep_t *ep;
    volatile int done;
    gw_status_t st;
} live_srv_t;

static void *live_serve(void *arg)
{
    live_srv_t *s = arg;
    s->st = gw_accept(s->l, 15000, &s->ep);
    while (!s->done) {
        if (gw_progress(s->ctx) == 0)
            gw_context_wait(s->ctx, 10);
    }
    return NULL;
}

static gw_verdict_t live_test(void *arg, const gw_topo_dev_t *gpu, const gw_topo_dev_t *nic, int port,
                              char *ev, size_t evlen, char *fix, size_t fixlen)
{
    (void)arg;
    char why[512] = "", dev[64];
    gw_verdict_t v = GW_VERDICT_FAIL;
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu) {
        snprintf(ev, evlen, "CUDA driver unusable: %s", why);
        return GW_VERDICT_SKIP;
    }
    int ord = -1;
    for (int i = 0; i < cu->device_count && ord < 0; i++) {
        char id[32];
        gw_cuda_pci_bus_id(i, id, sizeof(id));
        size_t li = strlen(id), lb = strlen(gpu->bdf);
        if (li >= 12 && lb >= 12 && !strcasecmp(id + li - 12, gpu->bdf + lb - 12))
            ord = i;
    }
    if (ord < 0) {
        snprintf(ev, evlen, "%s %s is not visible to CUDA in this process", gpu->name, gpu->bdf);
        snprintf(fix, fixlen, "unset CUDA_VISIBLE_DEVICES");
        return GW_VERDICT_UNKNOWN;
    }
    if (!gw_cuda_ctx_for_device(ord, why, sizeof(why))) {
        snprintf(ev, evlen, "no CUDA context on device %d: %s", ord, why);
        return GW_VERDICT_FAIL;
    }
    CUdeviceptr dptr = 0;
    CUresult cr = cu->cuMemAlloc(&dptr, LIVE_BYTES);
    if (cr != CUDA_SUCCESS) {
        snprintf(ev, evlen, "cuMemAlloc(%u) on device %d failed: %s", LIVE_BYTES, ord,
                 gw_cuda_strerror(cr, why, sizeof(why)));
        return GW_VERDICT_FAIL;
    }
    /* pin the transport and the port through the context's configuration
     * (the environment of the process stays as the user set it) */
    snprintf(dev, sizeof(dev), "%s:%d", nic->name, port);
    gw_config_t cfg = {.size = sizeof(cfg), .transports = "verbs", .log_level = -1,
                       .ib_device = dev};
    gw_context_t *sctx = NULL, *cctx = NULL;
    gw_mem_t *mem = NULL;
    gw_ep_t *ep = NULL;
    gw_rkey_t *rk = NULL;
    gw_request_t *req = NULL;
    live_srv_t srv = {0};
    pthread_t th;
    int th_started = 0;
    uint8_t *src = malloc(LIVE_BYTES), *back = malloc(LIVE_BYTES), *dev_copy = malloc(LIVE_BYTES);
    uint8_t key[512];
    size_t keylen = sizeof(key);
    char addr[96];
    gw_status_t st;
    if (!src || !back || !dev_copy) {
        snprintf(ev, evlen, "out of memory");
        goto out;
    }
    if ((st = gw_context_create(&cfg, &sctx)) != GW_OK) {
        snprintf(ev, evlen, "gw_context_create(transports verbs, ib_device %s) failed: %s",
                 dev, gw_status_str(st));
        goto out;
    }
    gw_transport_info_t ti = {.size = sizeof(ti)};
    int verbs_ok = 0;
    for (size_t i = 0; gw_transport_at(sctx, i, &ti) == GW_OK; i++)
        if (!strcmp(ti.name, "verbs")) {
            verbs_ok = ti.usable;
            snprintf(why, sizeof(why), "%s", ti.detail);
        }
    if (!verbs_ok) {
        snprintf(ev, evlen, "verbs transport not usable on %s: %s", dev, why[0] ? why : "not built in");
        v = GW_VERDICT_SKIP;
        goto out;
    }
    if ((st = gw_mem_reg(sctx, (void *)(uintptr_t)dptr, LIVE_BYTES,
                         GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &mem)) != GW_OK) {
        snprintf(ev, evlen, "registering %u bytes of %s memory on %s failed: %s", LIVE_BYTES, gpu->name,
                 dev, gw_last_error(sctx));
        snprintf(fix, fixlen, "see gpu.peermem, gpu.dmabuf, kernel.dmabuf and pcie.acs");
        goto out;
    }
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(mem, &mi);
    if (mi.type != GW_MEM_CUDA) {
        snprintf(ev, evlen, "the buffer was not detected as GPU memory (path: %s)", mi.path);
        goto out;
    }
    /* the verbs part of the path: "verbs: ..." up to the next "; " */
    char vpath[256] = "";
    const char *vp = strstr(mi.path, "verbs:");
    if (vp) {
        size_t n = strcspn(vp, ";");
        snprintf(vpath, sizeof(vpath), "%.*s", (int)(n < sizeof(vpath) ? n : sizeof(vpath) - 1), vp);
    }
    if (!vpath[0] || strstr(vpath, "not registered")) {
        snprintf(ev, evlen, "the verbs transport did not register %s memory on %s: %s", gpu->name, dev,
                 vpath[0] ? vpath : mi.path);
        snprintf(fix, fixlen, "see gpu.peermem, gpu.dmabuf, kernel.dmabuf and rdma_core.dmabuf");
        goto out;
    }
    if (strstr(vpath, "staging") || strstr(vpath, "staged")) {
        snprintf(ev, evlen, "GPU memory on %s goes through host staging, not GPUDirect: %s", dev, vpath);
        snprintf(fix, fixlen, "load nvidia-peermem, or use dma-buf (open GPU kernel modules, Linux 5.12+)");
        goto out;
    }
    if ((st = gw_mem_pack_rkey(mem, key, &keylen)) != GW_OK ||
        (st = gw_listen(sctx, "127.0.0.1:0", &srv.l)) != GW_OK ||
        (st = gw_listener_addr(srv.l, addr, sizeof(addr))) != GW_OK) {
        snprintf(ev, evlen, "setting up the loopback listener failed: %s", gw_last_error(sctx));
        goto out;
    }
    srv.ctx = sctx;
    if (pthread_create(&th, NULL, live_serve, &srv) != 0) {
        snprintf(ev, evlen, "pthread_create failed");
        goto out;
    }
    th_started = 1;
    if ((st = gw_context_create(&cfg, &cctx)) != GW_OK || (st = gw_connect(cctx, addr, &ep)) != GW_OK) {
        snprintf(ev, evlen, "loopback connect over %s failed: %s", dev,
                 cctx ? gw_last_error(cctx) : gw_status_str(st));
        goto out;
    }
    gw_ep_info_t ei = {.size = sizeof(ei)};
    gw_ep_query(ep, &ei);
    if (strcmp(ei.transport, "verbs") != 0) {
        snprintf(ev, evlen, "the loopback endpoint took %s, not verbs (%s)", ei.transport, ei.downgrades);
        goto out;
    }
    if ((st = gw_rkey_unpack(ep, key, keylen, &rk)) != GW_OK) {
        snprintf(ev, evlen, "gw_rkey_unpack failed: %s", gw_last_error(cctx));
        goto out;
    }
    for (size_t i = 0; i < LIVE_BYTES; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    memset(back, 0, LIVE_BYTES);
    if ((st = gw_put(ep, src, LIVE_BYTES, NULL, (uint64_t)dptr, rk, &req)) != GW_OK ||
        (st = gw_request_wait(req, 10000)) != GW_OK) {
        snprintf(ev, evlen, "put of %u bytes into %s over %s failed: %s (%s)", LIVE_BYTES, gpu->name,
                 dev, gw_status_str(st), gw_last_error(cctx));
        goto out;
    }
    gw_request_free(req);
    req = NULL;
    if ((st = gw_get(ep, back, LIVE_BYTES, NULL, (uint64_t)dptr, rk, &req)) != GW_OK ||
        (st = gw_request_wait(req, 10000)) != GW_OK) {
        snprintf(ev, evlen, "get of %u bytes from %s over %s failed: %s (%s)", LIVE_BYTES, gpu->name,
                 dev, gw_status_str(st), gw_last_error(cctx));
        goto out;
    }
    cr = cu->cuMemcpyDtoH(dev_copy, dptr, LIVE_BYTES);
    if (cr != CUDA_SUCCESS) {
        snprintf(ev, evlen, "cuMemcpyDtoH failed: %s", gw_cuda_strerror(cr, why, sizeof(why)));
        goto out;
    }
    if (memcmp(src, dev_copy, LIVE_BYTES) != 0 || memcmp(src, back, LIVE_BYTES) != 0) {
        snprintf(ev, evlen, "data mismatch after put/get through %s (%s): GPU copy %s, get %s", dev,
                 ei.path, memcmp(src, dev_copy, LIVE_BYTES) ? "differs" : "ok",
                 memcmp(src, back, LIVE_BYTES) ? "differs" : "ok");
        snprintf(fix, fixlen, "see pcie.acs and iommu: peer-to-peer writes may be lost or redirected");
        goto out;
    }
    snprintf(ev, evlen, "registered %u MiB on %s (%s), put and got it back through %s (%s): all bytes match",
             LIVE_BYTES >> 20, gpu->name, vpath, dev, ei.path);
    v = GW_VERDICT_PASS;
out:
    if (req)
        gw_request_free(req);
    gw_rkey_destroy(rk);
    if (ep)
        gw_ep_close(ep, 1000);
    gw_context_destroy(cctx);
    if (th_started) {
        srv.done = 1;
        pthread_join(th, NULL);
    }
    if (srv.ep)
        gw_ep_close(srv.ep, 1000);
    gw_listener_destroy(srv.l);
    gw_mem_dereg(mem);
    gw_context_destroy(sctx);
    cu->cuMemFree(dptr);
    free(src);
    free(back);
    free(dev_copy);
    return v;
}

static void doctor_usage(FILE *f)
{
    fprintf(f,
            "usage: gpuwire doctor [--json] [-v] [--bytes SIZE] [--sysfs DIR] [--proc DIR] [--boot DIR]\n"
            "\n"
            "Checks what GPUDirect RDMA needs on this machine: GPU and driver support (CUDA\n"
            "attributes), dma-buf support in the kernel, rdma-core and the NIC driver,\n"
            "nvidia-peermem, the PCIe path from each GPU to its nearest NIC, ACS on the\n"
            "bridges between them, the IOMMU mode, BAR1 size, the locked-memory limit, NIC\n"
            "ports (state, MTU, RoCE GIDs), and a live registration of GPU memory on each NIC.\n"
            "\n"
            "  --json        one JSON object: exit_code, summary, checks[{name, object, verdict, evidence, fix}]\n"
            "  -v            also list the checks that were skipped\n"
            "  --bytes SIZE  GPU memory one process will register (BAR1 and memlock checks; default 1G)\n"
            "  --sysfs DIR   read a recorded sysfs tree (default: GPUWIRE_SYSFS_ROOT, else /sys)\n"
            "  --proc DIR    read a recorded procfs (default /proc)\n"
            "  --boot DIR    where the kernel config-<release> lives (default /boot)\n"
            "\n"
            "Verdicts: pass, warn, fail, skip (not applicable or not built in), unknown (could not\n"
            "verify; the reason is given).  Exit status: 0 all pass, 1 warnings or unknowns, 2 failures.\n");
}

int cmd_doctor(int argc, char **argv)
{
    int json = 0, verbose = 0;
    gw_doctor_env_t env;
    gw_doctor_env_default(&env);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = 1;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            doctor_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--bytes") || !strcmp(a, "--sysfs") || !strcmp(a, "--proc") ||
                   !strcmp(a, "--boot")) {
            if (!val) {
                fprintf(stderr, "gpuwire doctor: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--bytes")) {
                uint64_t b;
                if (gw_parse_size(val, &b) < 0 || b == 0) {
                    fprintf(stderr, "gpuwire doctor: --bytes %s: not a size (e.g. 512M, 4G)\n", val);
                    return 2;
                }
                env.register_bytes = b;
            } else if (!strcmp(a, "--sysfs")) {
                env.sysfs_root = val;
            } else if (!strcmp(a, "--proc")) {
                env.proc_root = val;
            } else {
                env.boot_dir = val;
            }
        } else {
            fprintf(stderr, "gpuwire doctor: unknown option '%s'\n\n", a);
            doctor_usage(stderr);
            return 2;
        }
    }
    env.live_test = live_test;
    env.live_absent_why = NULL;
    /* a recorded tree describes another machine: this one's drivers cannot speak for it */
    const char *root = env.sysfs_root ? env.sysfs_root : gw_settings_sysfs_root(NULL);
    if (strcmp(root, "/sys") != 0) {
        static const char *rec = "a recorded sysfs tree is checked: the CUDA, verbs, libfabric and live checks need "
                                 "the live machine";
        env.cuda_query = NULL;
        env.verbs_query = NULL;
        env.ofi_query = NULL;
        env.live_test = NULL;
        env.topo_opts.nvlink = NULL;
        env.cuda_absent_why = env.verbs_absent_why = env.live_absent_why = env.ofi_absent_why = rec;
    }
    gw_doctor_report_t rep = {0};
    gw_status_t st = gw_doctor_run(&env, &rep);
    if (st != GW_OK) {
        fprintf(stderr, "gpuwire doctor: %s\n", gw_status_str(st));
        gw_doctor_report_free(&rep);
        return 2;
    }
    if (json)
        gw_doctor_print_json(&rep, stdout);
    else
        gw_doctor_print(&rep, stdout, verbose);
    int code = gw_doctor_exit_code(&rep);
    gw_doctor_report_free(&rep);
    return code;
}
