/* SPDX-License-Identifier: Apache-2.0 */
/* test_doctor.c - doctor verdicts on recorded sysfs trees, with fake CUDA,
 * verbs, live-test and memlock hooks injected through gw_doctor_env_t. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "diag/doctor.h"

/* ---- fakes ---- */
typedef struct fake {
    int cuda_fail;
    int gdr, dmabuf;           /* attribute values every GPU reports */
    int hide_gpu;              /* GPUs past this index are invisible to CUDA (-1: none) */
    int verbs_fail, has_dmabuf_mr, mtu;
    gw_verdict_t live;
    int live_calls;
    char live_pairs[256];
    uint64_t memlock;
    int ofi;             /* fake libfabric: 1 the provider answers for the NIC, 0 not, -1 absent */
    int ofi_hmem;        /* ... with FI_HMEM */
    int ofi_calls;
    char ofi_asked[128]; /* "prov/nic " per call */
} fake_t;

static const fx_t *cur_fx;

static int fake_cuda(void *arg, gw_doctor_cuda_t *out, char *why, size_t whylen)
{
    fake_t *f = arg;
    if (f->cuda_fail) {
        snprintf(why, whylen, "dlopen(libcuda.so.1) failed: libcuda.so.1: cannot open shared object file");
        return -1;
    }
    /* report what sysfs shows, as the real driver would */
    char err[256];
    gw_topo_t *t = NULL;
    if (gw_topo_create(cur_fx->sys, NULL, &t, err, sizeof(err)) != GW_OK)
        return -1;
    out->driver_version = 12040;
    out->ngpu = 0;
    for (int g = 0; g < t->ngpu; g++) {
        if (f->hide_gpu >= 0 && g >= f->hide_gpu)
            continue;
        gw_doctor_gpu_t *c = &out->gpu[out->ngpu++];
        /* CUDA prints upper-case hex */
        snprintf(c->pci_bus_id, sizeof(c->pci_bus_id), "%s", t->dev[g].bdf);
        for (char *p = c->pci_bus_id; *p; p++)
            if (*p >= 'a' && *p <= 'f')
                *p = (char)(*p - 'a' + 'A');
        snprintf(c->name, sizeof(c->name), "Fake H100");
        c->gdr_supported = f->gdr;
        c->dmabuf_supported = f->dmabuf;
    }
    gw_topo_destroy(t);
    return 0;
}

static int fake_verbs(void *arg, gw_doctor_verbs_t *out, char *why, size_t whylen)
{
    fake_t *f = arg;
    if (f->verbs_fail) {
        snprintf(why, whylen, "dlopen(libibverbs.so.1) failed: not found");
        return -1;
    }
    snprintf(out->library, sizeof(out->library), "libibverbs.so.1 (fake)");
    out->has_reg_dmabuf_mr = f->has_dmabuf_mr;
    out->nports = 4;
    for (int i = 0; i < 4; i++) {
        snprintf(out->port[i].dev, sizeof(out->port[i].dev), "mlx5_%d", i);
        out->port[i].port = 1;
        out->port[i].active_mtu = f->mtu;
    }
    return 0;
}

static gw_verdict_t fake_live(void *arg, const gw_topo_dev_t *gpu, const gw_topo_dev_t *nic, int port,
                              char *ev, size_t evlen, char *fix, size_t fixlen)
{
    fake_t *f = arg;
    f->live_calls++;
    size_t n = strlen(f->live_pairs);
    snprintf(f->live_pairs + n, sizeof(f->live_pairs) - n, "%s-%s:%d ", gpu->name, nic->name, port);
    snprintf(ev, evlen, "registered 4 MiB on %s, wrote and read back through %s", gpu->name, nic->name);
    if (f->live != GW_VERDICT_PASS)
        snprintf(fix, fixlen, "see gpu.peermem and kernel.dmabuf");
    return f->live;
}

/* libfabric as it would answer: a domain named like efa's, "<nic>-rdm" */
static int fake_ofi(void *arg, const char *prov, const char *nic, char *dom, size_t domlen, int *hmem, char *why,
                    size_t whylen)
{
    fake_t *f = arg;
    f->ofi_calls++;
    size_t n = strlen(f->ofi_asked);
    snprintf(f->ofi_asked + n, sizeof(f->ofi_asked) - n, "%s/%s ", prov, nic);
    if (f->ofi < 0) {
        snprintf(why, whylen, "dlopen(libfabric.so.1) failed: not found");
        return -1;
    }
    if (!f->ofi) {
        snprintf(why, whylen, "its domains are other0-rdm, none named after %s", nic);
        return 0;
    }
    snprintf(dom, domlen, "%s-rdm", nic);
    *hmem = f->ofi_hmem;
    return 1;
}

static int fake_memlock(void *arg, uint64_t *bytes, char *why, size_t whylen)
{
    (void)why;
    (void)whylen;
    *bytes = ((fake_t *)arg)->memlock;
    return 0;
}

static fake_t good(void)
{
    fake_t f = {.gdr = 1, .dmabuf = 1, .hide_gpu = -1, .has_dmabuf_mr = 1, .mtu = 4096,
                .live = GW_VERDICT_PASS, .memlock = UINT64_MAX};
    return f;
}

static gw_doctor_env_t env_for(const fx_t *fx, fake_t *f, int hooks)
{
    gw_doctor_env_t e = {.size = sizeof(e), .sysfs_root = fx->sys, .proc_root = fx->proc,
                         .boot_dir = fx->boot, .arg = f, .memlock = fake_memlock};
    e.topo_opts = (gw_topo_opts_t){sizeof(gw_topo_opts_t), NULL, NULL, fx->nvlink};
    if (hooks) {
        e.cuda_query = fake_cuda;
        e.verbs_query = fake_verbs;
        e.live_test = fake_live;
        e.ofi_query = fake_ofi;
    }
    cur_fx = fx;
    return e;
}

static gw_verdict_t verdict(const gw_doctor_report_t *r, const char *name, const char *obj)
{
    const gw_check_t *c = gw_doctor_find(r, name, obj);
    return c ? c->verdict : (gw_verdict_t)-1;
}

#define CHECK_V(rep, name, obj, want)                                                          \
    do {                                                                                       \
        const gw_check_t *c_ = gw_doctor_find((rep), (name), (obj));                           \
        if (!c_ || c_->verdict != (want)) {                                                    \
            fprintf(stderr, "%s:%d: %s %s: %s (%s), expected %s\n", __FILE__, __LINE__, (name), \
                    (obj) ? (obj) : "", c_ ? gw_verdict_name(c_->verdict) : "missing",         \
                    c_ ? c_->evidence : "", gw_verdict_name(want));                            \
            gwt_failures++;                                                                    \
        }                                                                                      \
    } while (0)

static void run(gw_doctor_env_t *e, gw_doctor_report_t *r)
{
    memset(r, 0, sizeof(*r));
    REQUIRE_OK(gw_doctor_run(e, r));
    /* invariants of every report */
    for (int i = 0; i < r->n; i++) {
        const gw_check_t *c = &r->checks[i];
        CHECK(c->evidence[0]);
        if (c->verdict == GW_VERDICT_FAIL || c->verdict == GW_VERDICT_WARN) {
            if (!c->fix[0])
                fprintf(stderr, "check %s %s has no fix\n", c->name, c->object);
            CHECK(c->fix[0]);
        }
    }
}

static void count_verdicts(const gw_doctor_report_t *r, const char *name, gw_verdict_t v, int want)
{
    int n = 0;
    for (int i = 0; i < r->n; i++)
        n += !strcmp(r->checks[i].name, name) && r->checks[i].verdict == v;
    if (n != want) {
        fprintf(stderr, "%s: %d checks %s, expected %d\n", name, n, gw_verdict_name(v), want);
        gwt_failures++;
    }
}

static void test_cloudvm(void)
{
    fx_t fx;
    fx_build(&fx, "cloudvm");
    fake_t f = good();
    gw_doctor_env_t e = env_for(&fx, &f, 1);
    gw_doctor_report_t r;
    run(&e, &r);
    CHECK_V(&r, "gpu.present", NULL, GW_VERDICT_PASS);
    CHECK_V(&r, "nic.present", NULL, GW_VERDICT_FAIL);
    CHECK_V(&r, "cuda.driver", NULL, GW_VERDICT_PASS);
    count_verdicts(&r, "gpu.rdma", GW_VERDICT_PASS, 4);
    count_verdicts(&r, "pcie.path", GW_VERDICT_SKIP, 4);
    count_verdicts(&r, "gpu.bar1", GW_VERDICT_PASS, 4);
    CHECK_V(&r, "gpu.peermem", NULL, GW_VERDICT_WARN);
    CHECK_V(&r, "kernel.dmabuf", NULL, GW_VERDICT_PASS);
    CHECK_V(&r, "rdma_core.dmabuf", NULL, GW_VERDICT_SKIP);
    CHECK_V(&r, "iommu", NULL, GW_VERDICT_PASS);
    CHECK_V(&r, "memlock", NULL, GW_VERDICT_PASS);
    CHECK(gw_doctor_find(&r, "live.gdr", NULL) == NULL); /* no NIC, nothing to test */
    CHECK(f.live_calls == 0);
    CHECK(gw_doctor_exit_code(&r) == 2);
    gw_doctor_report_free(&r);

    /* CUDA absent: the GPU checks skip, the driver check fails */
    f.cuda_fail = 1;
    run(&e, &r);
    CHECK_V(&r, "cuda.driver", NULL, GW_VERDICT_FAIL);
    const gw_check_t *c = gw_doctor_find(&r, "cuda.driver", NULL);
    CHECK(c && strstr(c->evidence, "libcuda.so.1"));
    count_verdicts(&r, "gpu.rdma", GW_VERDICT_SKIP, 4);
    gw_doctor_report_free(&r);

    /* attributes: no GDR, no dma-buf, a GPU hidden from CUDA, unanswered attribute */
    f = good();
    f.gdr = 0;
    f.dmabuf = 0;
    f.hide_gpu = 3;
    run(&e, &r);
    CHECK_V(&r, "cuda.driver", NULL, GW_VERDICT_WARN); /* 3 visible of 4 */
    CHECK_V(&r, "gpu.rdma", "GPU0", GW_VERDICT_FAIL);
    CHECK_V(&r, "gpu.dmabuf", "GPU0", GW_VERDICT_WARN);
    CHECK_V(&r, "gpu.rdma", "GPU3", GW_VERDICT_UNKNOWN);
    gw_doctor_report_free(&r);
    f = good();
    f.gdr = -1;
    run(&e, &r);
    CHECK_V(&r, "gpu.rdma", "GPU2", GW_VERDICT_UNKNOWN);
    gw_doctor_report_free(&r);

    /* memlock and BAR1 against what will be registered */
    f = good();
    f.memlock = 64 << 10;
    e.register_bytes = 32ull << 30;
    run(&e, &r);
    CHECK_V(&r, "memlock", NULL, GW_VERDICT_WARN);
    count_verdicts(&r, "gpu.bar1", GW_VERDICT_FAIL, 4); /* 16 GiB < 32 GiB */
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

static void test_dgx8(void)
{
    fx_t fx;
    fx_build(&fx, "dgx8");
    fake_t f = good();
    gw_doctor_env_t e = env_for(&fx, &f, 1);
    gw_doctor_report_t r;
    run(&e, &r);
    for (int i = 0; i < r.n; i++) {
        const gw_check_t *c = &r.checks[i];
        if (c->verdict != GW_VERDICT_PASS && c->verdict != GW_VERDICT_SKIP) {
            fprintf(stderr, "dgx8: %s %s is %s: %s\n", c->name, c->object, gw_verdict_name(c->verdict),
                    c->evidence);
            gwt_failures++;
        }
    }
    CHECK(gw_doctor_exit_code(&r) == 0);
    count_verdicts(&r, "pcie.path", GW_VERDICT_PASS, 8);
    count_verdicts(&r, "pcie.acs", GW_VERDICT_PASS, 8);
    count_verdicts(&r, "nic.port", GW_VERDICT_PASS, 4);
    count_verdicts(&r, "nic.mtu", GW_VERDICT_PASS, 4);
    count_verdicts(&r, "nic.gid", GW_VERDICT_SKIP, 4); /* InfiniBand */
    count_verdicts(&r, "live.gdr", GW_VERDICT_PASS, 4);
    CHECK_V(&r, "gpu.peermem", NULL, GW_VERDICT_PASS);
    CHECK_V(&r, "iommu", NULL, GW_VERDICT_PASS);
    const gw_check_t *p = gw_doctor_find(&r, "pcie.path", "GPU3");
    CHECK(p && strstr(p->evidence, "mlx5_1") && strstr(p->evidence, "PIX"));
    /* each NIC tested once, with the GPU nearest it */
    CHECK(f.live_calls == 4);
    CHECK(!strcmp(f.live_pairs, "GPU0-mlx5_0:1 GPU2-mlx5_1:1 GPU4-mlx5_2:1 GPU6-mlx5_3:1 "));

    /* JSON */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    gw_doctor_print_json(&r, mf);
    fclose(mf);
    CHECK(!strncmp(buf, "{\"exit_code\":0,\"summary\":{\"pass\":", 33));
    CHECK(strstr(buf, "{\"name\":\"pcie.acs\",\"object\":\"GPU0 0000:03:00.0\",\"verdict\":\"pass\""));
    free(buf);
    gw_doctor_report_free(&r);

    /* without hooks: nothing CUDA or verbs could say is passed */
    gw_doctor_env_t bare = env_for(&fx, &f, 0);
    bare.cuda_absent_why = "built without the CUDA loader (src/cuda not in this build)";
    run(&bare, &r);
    CHECK_V(&r, "cuda.driver", NULL, GW_VERDICT_SKIP);
    const gw_check_t *c = gw_doctor_find(&r, "cuda.driver", NULL);
    CHECK(c && strstr(c->evidence, "src/cuda not in this build"));
    count_verdicts(&r, "gpu.rdma", GW_VERDICT_SKIP, 8);
    count_verdicts(&r, "nic.mtu", GW_VERDICT_UNKNOWN, 4); /* IB MTU is not in sysfs */
    count_verdicts(&r, "live.gdr", GW_VERDICT_SKIP, 4);
    CHECK(gw_doctor_exit_code(&r) == 1);
    gw_doctor_report_free(&r);

    /* failures the hooks report */
    f = good();
    f.live = GW_VERDICT_FAIL;
    f.has_dmabuf_mr = 0;
    f.mtu = 2048;
    run(&e, &r);
    count_verdicts(&r, "live.gdr", GW_VERDICT_FAIL, 4);
    CHECK_V(&r, "rdma_core.dmabuf", NULL, GW_VERDICT_WARN);
    count_verdicts(&r, "nic.mtu", GW_VERDICT_WARN, 4);
    CHECK(gw_doctor_exit_code(&r) == 2);
    gw_doctor_report_free(&r);
    f = good();
    f.verbs_fail = 1;
    run(&e, &r);
    CHECK_V(&r, "rdma_core.dmabuf", NULL, GW_VERDICT_FAIL);
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

static void test_acs(void)
{
    fx_t fx;
    fx_build(&fx, "acs");
    fake_t f = good();
    gw_doctor_env_t e = env_for(&fx, &f, 1);
    gw_doctor_report_t r;
    run(&e, &r);
    CHECK_V(&r, "pcie.path", "GPU0", GW_VERDICT_PASS);
    CHECK_V(&r, "pcie.path", "GPU1", GW_VERDICT_PASS); /* PXB */
    CHECK_V(&r, "pcie.acs", "GPU0", GW_VERDICT_FAIL);
    CHECK_V(&r, "pcie.acs", "GPU1", GW_VERDICT_FAIL);
    const gw_check_t *c = gw_doctor_find(&r, "pcie.acs", "GPU0");
    CHECK(c && strstr(c->evidence, "0000:02:00.0: ACS control 0x001d at 0x150: ReqRedir CmpltRedir"));
    CHECK(c && strstr(c->fix, "setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0000"));
    CHECK(c && strstr(c->fix, "setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000"));
    c = gw_doctor_find(&r, "pcie.acs", "GPU1");
    CHECK(c && !strstr(c->evidence, "0000:02:00.0") && strstr(c->evidence, "0000:02:01.0"));
    CHECK(c && strstr(c->evidence, "0000:02:02.0") == NULL); /* ACS off there: not blamed */
    CHECK_V(&r, "iommu", NULL, GW_VERDICT_WARN);
    c = gw_doctor_find(&r, "iommu", NULL);
    CHECK(c && strstr(c->evidence, "DMA-FQ") && strstr(c->evidence, "intel_iommu=on"));
    count_verdicts(&r, "gpu.bar1", GW_VERDICT_FAIL, 2); /* 256 MiB < 1 GiB */
    CHECK_V(&r, "nic.gid", "mlx5_0:1", GW_VERDICT_PASS);
    CHECK_V(&r, "gpu.peermem", NULL, GW_VERDICT_WARN);
    CHECK(gw_doctor_exit_code(&r) == 2);
    gw_doctor_report_free(&r);
    /* RoCE MTU from the netdev when libibverbs is absent */
    gw_doctor_env_t bare = env_for(&fx, &f, 0);
    bare.register_bytes = 128ull << 20;
    run(&bare, &r);
    CHECK_V(&r, "nic.mtu", "mlx5_0:1", GW_VERDICT_WARN);
    c = gw_doctor_find(&r, "nic.mtu", "mlx5_0:1");
    CHECK(c && strstr(c->evidence, "MTU 1500") && strstr(c->fix, "ens4np0"));
    count_verdicts(&r, "gpu.bar1", GW_VERDICT_PASS, 2); /* 256 MiB >= 128 MiB */
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

static void test_numa(void)
{
    fx_t fx;
    fx_build(&fx, "numa");
    fake_t f = good();
    gw_doctor_env_t e = env_for(&fx, &f, 1);
    gw_doctor_report_t r;
    run(&e, &r);
    CHECK_V(&r, "pcie.path", "GPU0", GW_VERDICT_FAIL);
    CHECK_V(&r, "pcie.path", "GPU1", GW_VERDICT_FAIL);
    const gw_check_t *c = gw_doctor_find(&r, "pcie.path", "GPU0");
    CHECK(c && strstr(c->evidence, "mlx5_0") && strstr(c->evidence, "SYS") && strstr(c->evidence, "NUMA"));
    CHECK_V(&r, "pcie.acs", "GPU0", GW_VERDICT_SKIP);
    CHECK_V(&r, "nic.port", "mlx5_0:1", GW_VERDICT_PASS);
    CHECK_V(&r, "nic.port", "mlx5_1:1", GW_VERDICT_WARN); /* down, but another port is up */
    CHECK_V(&r, "nic.mtu", "mlx5_1:1", GW_VERDICT_SKIP);
    CHECK_V(&r, "live.gdr", "mlx5_0", GW_VERDICT_PASS);
    CHECK_V(&r, "live.gdr", "mlx5_1", GW_VERDICT_SKIP);
    CHECK(f.live_calls == 1);
    CHECK(gw_doctor_exit_code(&r) == 2);
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

static void test_broken(void)
{
    fx_t fx;
    fx_build(&fx, "broken");
    fake_t f = good();
    gw_doctor_env_t e = env_for(&fx, &f, 0);
    gw_doctor_report_t r;
    run(&e, &r);
    CHECK_V(&r, "gpu.bar1", "GPU0", GW_VERDICT_UNKNOWN);
    CHECK_V(&r, "gpu.bar1", "GPU1", GW_VERDICT_UNKNOWN);
    CHECK_V(&r, "pcie.acs", "GPU0", GW_VERDICT_UNKNOWN);
    const gw_check_t *c = gw_doctor_find(&r, "pcie.acs", "GPU0");
    CHECK(c && strstr(c->evidence, "only 64 bytes"));
    CHECK_V(&r, "gpu.peermem", NULL, GW_VERDICT_UNKNOWN);
    CHECK_V(&r, "kernel.dmabuf", NULL, GW_VERDICT_UNKNOWN);
    CHECK_V(&r, "nic.dmabuf", "mlx5_0", GW_VERDICT_UNKNOWN);
    CHECK_V(&r, "nic.port", "mlx5_0:1", GW_VERDICT_UNKNOWN);
    CHECK_V(&r, "nic.mtu", "mlx5_1:1", GW_VERDICT_UNKNOWN);
    c = gw_doctor_find(&r, "nic.port", "mlx5_0:1");
    CHECK(c && strstr(c->evidence, "Is a directory"));
    /* the doctor says "unknown", never "pass", for anything it could not read */
    const char *never_pass[][2] = {{"gpu.bar1", "GPU0"}, {"gpu.bar1", "GPU1"}, {"pcie.acs", "GPU0"},
                                   {"gpu.peermem", NULL}, {"kernel.dmabuf", NULL}, {"nic.mtu", "mlx5_1"}};
    for (size_t i = 0; i < sizeof(never_pass) / sizeof(never_pass[0]); i++)
        CHECK(verdict(&r, never_pass[i][0], never_pass[i][1]) != GW_VERDICT_PASS);
    CHECK(gw_doctor_exit_code(&r) == 1);
    gw_doctor_report_free(&r);

    /* no tree at all */
    gw_doctor_env_t none = {.size = sizeof(none), .sysfs_root = "/nonexistent/gpuwire-sys"};
    run(&none, &r);
    CHECK(r.n == 1);
    CHECK_V(&r, "topology", NULL, GW_VERDICT_FAIL);
    CHECK(gw_doctor_exit_code(&r) == 2);
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

/* EFA NICs: found like verbs NICs (presence, PCIe path to the nearest GPU,
 * dma-buf by driver), their RoCE-only checks skipped, and libfabric asked
 * for the efa provider on each; the verbs live test does not run on them. */
static void test_efa(void)
{
    fx_t fx;
    fx_build(&fx, "efa");
    fake_t f = good();
    f.ofi = 1;
    f.ofi_hmem = 1;
    gw_doctor_env_t e = env_for(&fx, &f, 1);
    gw_doctor_report_t r;
    run(&e, &r);
    CHECK_V(&r, "nic.present", NULL, GW_VERDICT_PASS);
    const gw_check_t *c = gw_doctor_find(&r, "nic.present", NULL);
    CHECK(c && strstr(c->evidence, "rdmap21s0 0000:15:00.0 via libfabric efa"));
    c = gw_doctor_find(&r, "pcie.path", "GPU0");
    CHECK(c && c->verdict == GW_VERDICT_PASS && strstr(c->evidence, "nearest NIC rdmap21s0") &&
          strstr(c->evidence, "PIX"));
    c = gw_doctor_find(&r, "pcie.path", "GPU2");
    CHECK(c && strstr(c->evidence, "nearest NIC rdmap149s0"));
    CHECK_V(&r, "nic.dmabuf", "rdmap21s0", GW_VERDICT_PASS);
    CHECK_V(&r, "nic.port", "rdmap21s0:1", GW_VERDICT_PASS);
    count_verdicts(&r, "nic.gid", GW_VERDICT_SKIP, 2);
    count_verdicts(&r, "nic.mtu", GW_VERDICT_SKIP, 2);
    count_verdicts(&r, "ofi.provider", GW_VERDICT_PASS, 2);
    c = gw_doctor_find(&r, "ofi.provider", "rdmap21s0");
    CHECK(c && strstr(c->evidence, "domain rdmap21s0-rdm") && strstr(c->evidence, "FI_HMEM"));
    CHECK(f.ofi_calls == 2 && strstr(f.ofi_asked, "efa/rdmap21s0") && strstr(f.ofi_asked, "efa/rdmap149s0"));
    count_verdicts(&r, "live.gdr", GW_VERDICT_SKIP, 2);
    CHECK(f.live_calls == 0);
    gw_doctor_report_free(&r);

    /* without FI_HMEM: GPU memory would not go over the NIC */
    f = good();
    f.ofi = 1;
    e = env_for(&fx, &f, 1);
    run(&e, &r);
    count_verdicts(&r, "ofi.provider", GW_VERDICT_WARN, 2);
    gw_doctor_report_free(&r);
    /* the provider does not answer for the NIC; libfabric absent */
    f.ofi = 0;
    run(&e, &r);
    count_verdicts(&r, "ofi.provider", GW_VERDICT_FAIL, 2);
    c = gw_doctor_find(&r, "ofi.provider", "rdmap21s0");
    CHECK(c && strstr(c->evidence, "none named after rdmap21s0"));
    gw_doctor_report_free(&r);
    f.ofi = -1;
    run(&e, &r);
    c = gw_doctor_find(&r, "ofi.provider", "rdmap21s0");
    CHECK(c && c->verdict == GW_VERDICT_FAIL && strstr(c->evidence, "without libfabric") &&
          strstr(c->fix, "EFA installer"));
    gw_doctor_report_free(&r);
    /* no hook: skipped with the reason */
    e = env_for(&fx, &f, 0);
    e.ofi_absent_why = "built without the ofi transport";
    run(&e, &r);
    count_verdicts(&r, "ofi.provider", GW_VERDICT_SKIP, 2);
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

/* A CXI NIC: listed, nearest to the GPU under its switch, no libibverbs
 * needed (rdma_core skipped), the cxi provider asked. */
static void test_cxi(void)
{
    fx_t fx;
    fx_build(&fx, "cxi");
    fake_t f = good();
    f.ofi = 1;
    f.ofi_hmem = 1;
    gw_doctor_env_t e = env_for(&fx, &f, 1);
    gw_doctor_report_t r;
    run(&e, &r);
    const gw_check_t *c = gw_doctor_find(&r, "nic.present", NULL);
    CHECK(c && c->verdict == GW_VERDICT_PASS && strstr(c->evidence, "cxi0 0000:04:00.0 via libfabric cxi"));
    c = gw_doctor_find(&r, "pcie.path", "GPU0");
    CHECK(c && c->verdict == GW_VERDICT_PASS && strstr(c->evidence, "nearest NIC cxi0"));
    CHECK_V(&r, "rdma_core.dmabuf", NULL, GW_VERDICT_SKIP);
    CHECK_V(&r, "nic.port", "cxi0:1", GW_VERDICT_PASS);
    CHECK_V(&r, "nic.gid", "cxi0:1", GW_VERDICT_SKIP);
    CHECK_V(&r, "ofi.provider", "cxi0", GW_VERDICT_PASS);
    CHECK(strstr(f.ofi_asked, "cxi/cxi0") != NULL);
    gw_doctor_report_free(&r);
    fx_remove(&fx);
}

int main(void)
{
    test_cloudvm();
    test_dgx8();
    test_acs();
    test_numa();
    test_broken();
    test_efa();
    test_cxi();
    return gwt_done("topo_doctor");
}
