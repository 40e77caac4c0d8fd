/* SPDX-License-Identifier: Apache-2.0 */
/* doctor.c - one check per GPUDirect RDMA requirement; see doctor.h. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "diag/doctor.h"

#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

const char *gw_verdict_name(gw_verdict_t v)
{
    switch (v) {
    case GW_VERDICT_PASS: return "pass";
    case GW_VERDICT_WARN: return "warn";
    case GW_VERDICT_FAIL: return "fail";
    case GW_VERDICT_SKIP: return "skip";
    case GW_VERDICT_UNKNOWN: return "unknown";
    }
    return "?";
}

typedef struct dctx {
    const gw_doctor_env_t *env;
    gw_doctor_report_t *rep;
    const char *sys, *proc, *boot;
    uint64_t reg_bytes;
    gw_topo_t *topo;
    char topo_err[512];
    int cuda_state; /* 1 ok, 0 failed, -1 no hook */
    gw_doctor_cuda_t cuda;
    char cuda_why[512];
    int verbs_state;
    gw_doctor_verbs_t verbs;
    char verbs_why[512];
    char release[128];
    int kmaj, kmin; /* -1 unknown */
    char release_why[256];
    int nomem;
} dctx_t;

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static gw_check_t *add(dctx_t *x, const char *name, const char *object, gw_verdict_t v,
                       const char *fix, const char *fmt, ...)
{
    gw_doctor_report_t *r = x->rep;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 32;
        gw_check_t *nc = realloc(r->checks, (size_t)cap * sizeof(*nc));
        if (!nc) {
            x->nomem = 1;
            return NULL;
        }
        r->checks = nc;
        r->cap = cap;
    }
    gw_check_t *c = &r->checks[r->n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    snprintf(c->object, sizeof(c->object), "%s", object ? object : "");
    c->verdict = v;
    snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->evidence, sizeof(c->evidence), fmt, ap);
    va_end(ap);
    return c;
}

static void fmt_size(uint64_t b, char *out, size_t len)
{
    if (b >= GIB && b % GIB == 0)
        snprintf(out, len, "%llu GiB", (unsigned long long)(b / GIB));
    else if (b >= MIB)
        snprintf(out, len, "%llu MiB", (unsigned long long)(b / MIB));
    else
        snprintf(out, len, "%llu KiB", (unsigned long long)(b / 1024));
}

static void gpu_obj(const gw_topo_dev_t *d, char *out, size_t len)
{
    snprintf(out, len, "%s %s", d->name, d->bdf);
}


/* ---- host facts -------------------------------------------------------- */

static void read_release(dctx_t *x)
{
    x->kmaj = x->kmin = -1;
    if (gw_sysfs_read(x->proc, "sys/kernel/osrelease", x->release, sizeof(x->release),
                      x->release_why, sizeof(x->release_why)) <= 0) {
        if (!x->release_why[0])
            snprintf(x->release_why, sizeof(x->release_why), "%s/sys/kernel/osrelease is empty",
                     x->proc);
        x->release[0] = '\0';
        return;
    }
    if (sscanf(x->release, "%d.%d", &x->kmaj, &x->kmin) != 2) {
        snprintf(x->release_why, sizeof(x->release_why), "kernel release \"%.60s\" unparsable",
                 x->release);
        x->kmaj = x->kmin = -1;
    }
}

static int kernel_at_least(const dctx_t *x, int maj, int min)
{
    return x->kmaj > maj || (x->kmaj == maj && x->kmin >= min);
}

/* Looks up CONFIG_<sym> in the kernel config: returns 'y', 'm', 'n' (not
 * set), or 0 when no config could be read (why says where it looked). */
static int kconfig(dctx_t *x, const char *const *syms, char *vals, int nsyms, char *src,
                   size_t srclen, char *why, size_t whylen)
{
    char path[1024];
    FILE *f = NULL;
    int from_pipe = 0;
    snprintf(path, sizeof(path), "%s/config-%s", x->boot, x->release);
    if (x->release[0])
        f = fopen(path, "re");
    if (!f) {
        int e = x->release[0] ? errno : ENOENT;
        char gz[600];
        snprintf(gz, sizeof(gz), "%s/config.gz", x->proc);
        if (access(gz, R_OK) == 0 && !strchr(gz, '\'') && access("/bin/gzip", X_OK) == 0) {
            char cmd[700];
            snprintf(cmd, sizeof(cmd), "/bin/gzip -dc -- '%s' 2>/dev/null", gz);
            f = popen(cmd, "r");
            from_pipe = f != NULL;
            snprintf(src, srclen, "%s", gz);
        }
        if (!f) {
            snprintf(why, whylen, "kernel config not readable (%.300s: %s; %.300s absent or no gzip)",
                     path, strerror(e), gz);
            return 0;
        }
    } else {
        snprintf(src, srclen, "%.600s", path);
    }
    for (int i = 0; i < nsyms; i++)
        vals[i] = 'n';
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof(line), f)) {
        lines++;
        for (int i = 0; i < nsyms; i++) {
            size_t l = strlen(syms[i]);
            if (!strncmp(line, syms[i], l) && line[l] == '=')
                vals[i] = line[l + 1] == 'y' ? 'y' : line[l + 1] == 'm' ? 'm' : 'n';
        }
    }
    if (from_pipe)
        pclose(f);
    else
        fclose(f);
    if (lines == 0) {
        snprintf(why, whylen, "kernel config %.300s is empty", src);
        return 0;
    }
    return 1;
}

/* ---- checks ------------------------------------------------------------ */

static void check_presence(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    char list[600] = "";
    for (int g = 0; g < t->ngpu; g++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof(list) - l, "%s%s %s", g ? ", " : "", t->dev[g].name, t->dev[g].bdf);
    }
    if (t->ngpu)
        add(x, "gpu.present", "", GW_VERDICT_PASS, "", "%d NVIDIA GPU(s) in %s: %s", t->ngpu, x->sys,
            list);
    else if (strstr(t->note, "no PCI devices"))
        add(x, "gpu.present", "", GW_VERDICT_UNKNOWN, "check that sysfs is mounted (or GPUWIRE_SYSFS_ROOT)",
            "cannot list PCI devices: %s", t->note);
    else
        add(x, "gpu.present", "", GW_VERDICT_FAIL,
            "run on a machine with an NVIDIA GPU, or pass the GPU through to this VM or container",
            "no NVIDIA GPU (vendor 0x10de, class 0x0300/0x0302) in %s/bus/pci/devices", x->sys);

    list[0] = '\0';
    for (int k = 0; k < t->nnic; k++) {
        size_t l = strlen(list);
        const gw_topo_dev_t *d = gw_topo_nic(t, k);
        snprintf(list + l, sizeof(list) - l, "%s%s %s%s%s", k ? ", " : "", d->name,
                 d->bdf[0] ? d->bdf : "(no PCI device)", gw_topo_nic_verbs(d) ? "" : " via libfabric ",
                 gw_topo_nic_verbs(d) ? "" : d->fabric);
    }
    if (t->nnic)
        add(x, "nic.present", "", GW_VERDICT_PASS, "", "%d RDMA device(s): %s", t->nnic, list);
    else if (strstr(t->note, "RDMA devices unknown"))
        add(x, "nic.present", "", GW_VERDICT_UNKNOWN, "", "%s", t->note);
    else
        add(x, "nic.present", "", GW_VERDICT_FAIL,
            "load the NIC's RDMA driver (e.g. modprobe mlx5_ib); to test without one: rdma link add rxe0 type rxe netdev eth0",
            "no RDMA device in %s/class/infiniband, no CXI NIC in %s/class/cxi", x->sys, x->sys);
}

static const gw_doctor_gpu_t *cuda_gpu(const dctx_t *x, const char *bdf)
{
    for (int i = 0; i < x->cuda.ngpu && i < GW_TOPO_MAX_GPU; i++) {
        const char *c = x->cuda.gpu[i].pci_bus_id;
        /* CUDA writes "0000:07:00.0" (sometimes 8-digit domains, upper case) */
        size_t lc = strlen(c), lb = strlen(bdf);
        if (lc >= 12 && lb >= 12 && !strcasecmp(c + lc - 12, bdf + lb - 12))
            return &x->cuda.gpu[i];
    }
    return NULL;
}

static void check_cuda(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    const gw_doctor_env_t *e = x->env;
    if (!t->ngpu) {
        add(x, "cuda.driver", "", GW_VERDICT_SKIP, "", "no NVIDIA GPU in sysfs");
    } else if (x->cuda_state < 0) {
        add(x, "cuda.driver", "", GW_VERDICT_SKIP, "", "%s",
            e->cuda_absent_why ? e->cuda_absent_why : "built without the CUDA driver loader");
    } else if (x->cuda_state == 0) {
        add(x, "cuda.driver", "", GW_VERDICT_FAIL,
            "install the NVIDIA driver whose libcuda.so.1 matches the loaded kernel module (or set GPUWIRE_CUDA_LIB)",
            "CUDA driver unusable: %s", x->cuda_why);
    } else {
        add(x, "cuda.driver", "", x->cuda.ngpu == t->ngpu ? GW_VERDICT_PASS : GW_VERDICT_WARN,
            x->cuda.ngpu == t->ngpu ? "" : "check CUDA_VISIBLE_DEVICES and the container's device list",
            "CUDA driver API %d.%d, %d device(s) visible, %d GPU(s) in sysfs",
            x->cuda.driver_version / 1000, (x->cuda.driver_version % 1000) / 10, x->cuda.ngpu, t->ngpu);
    }
    for (int g = 0; g < t->ngpu; g++) {
        char obj[64];
        gpu_obj(&t->dev[g], obj, sizeof(obj));
        if (x->cuda_state != 1) {
            const char *why = x->cuda_state < 0 ? (e->cuda_absent_why ? e->cuda_absent_why
                                                                      : "built without the CUDA driver loader")
                                                : "CUDA driver unusable (see cuda.driver)";
            add(x, "gpu.rdma", obj, GW_VERDICT_SKIP, "", "%s", why);
            add(x, "gpu.dmabuf", obj, GW_VERDICT_SKIP, "", "%s", why);
            continue;
        }
        const gw_doctor_gpu_t *cg = cuda_gpu(x, t->dev[g].bdf);
        if (!cg) {
            add(x, "gpu.rdma", obj, GW_VERDICT_UNKNOWN, "unset CUDA_VISIBLE_DEVICES to check every GPU",
                "GPU not visible to CUDA in this process");
            add(x, "gpu.dmabuf", obj, GW_VERDICT_UNKNOWN, "unset CUDA_VISIBLE_DEVICES to check every GPU",
                "GPU not visible to CUDA in this process");
            continue;
        }
        if (cg->gdr_supported == 1)
            add(x, "gpu.rdma", obj, GW_VERDICT_PASS, "",
                "%s: CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 1", cg->name);
        else if (cg->gdr_supported == 0)
            add(x, "gpu.rdma", obj, GW_VERDICT_FAIL,
                "use a GPU and driver with GPUDirect RDMA (data-center GPUs; not most GeForce or some vGPU profiles)",
                "%s: CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 0", cg->name);
        else
            add(x, "gpu.rdma", obj, GW_VERDICT_UNKNOWN, "update the NVIDIA driver (the attribute needs CUDA 11.3+)",
                "%s: the driver does not answer CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED", cg->name);
        if (cg->dmabuf_supported == 1)
            add(x, "gpu.dmabuf", obj, GW_VERDICT_PASS, "",
                "%s: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 1", cg->name);
        else if (cg->dmabuf_supported == 0)
            add(x, "gpu.dmabuf", obj, GW_VERDICT_WARN,
                "use the open GPU kernel modules (driver 515+, nvidia-open) for dma-buf, or rely on nvidia-peermem",
                "%s: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0: registration must go through nvidia-peermem",
                cg->name);
        else
            add(x, "gpu.dmabuf", obj, GW_VERDICT_UNKNOWN, "update the NVIDIA driver (the attribute needs CUDA 11.7+)",
                "%s: the driver does not answer CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED", cg->name);
    }
}

static void check_kernel_dmabuf(dctx_t *x)
{
    if (x->kmaj < 0) {
        add(x, "kernel.dmabuf", "", GW_VERDICT_UNKNOWN, "", "kernel release unknown: %s", x->release_why);
        return;
    }
    if (!kernel_at_least(x, 5, 12)) {
        add(x, "kernel.dmabuf", "", GW_VERDICT_FAIL,
            "use Linux 5.12 or newer for dma-buf registration, or load nvidia-peermem",
            "kernel %s is older than 5.12, which added dma-buf memory regions (ib_umem_dmabuf)", x->release);
        return;
    }
    static const char *const syms[] = {"CONFIG_DMA_SHARED_BUFFER", "CONFIG_INFINIBAND_USER_MEM",
                                       "CONFIG_INFINIBAND"};
    char vals[3], src[700] = "", why[768] = "";
    if (!kconfig(x, syms, vals, 3, src, sizeof(src), why, sizeof(why))) {
        add(x, "kernel.dmabuf", "", GW_VERDICT_UNKNOWN,
            "make /boot/config-$(uname -r) or /proc/config.gz readable to verify",
            "kernel %s is 5.12 or newer, but %s: cannot confirm CONFIG_DMA_SHARED_BUFFER", x->release, why);
        return;
    }
    if (vals[0] == 'y' && vals[1] == 'y')
        add(x, "kernel.dmabuf", "", GW_VERDICT_PASS, "",
            "kernel %s (>= 5.12), CONFIG_DMA_SHARED_BUFFER=y, CONFIG_INFINIBAND_USER_MEM=y (%s)",
            x->release, src);
    else
        add(x, "kernel.dmabuf", "", GW_VERDICT_FAIL,
            "use a kernel built with CONFIG_DMA_SHARED_BUFFER=y and CONFIG_INFINIBAND_USER_MEM=y, or load nvidia-peermem",
            "kernel %s: CONFIG_DMA_SHARED_BUFFER=%c, CONFIG_INFINIBAND_USER_MEM=%c, CONFIG_INFINIBAND=%c (%s)",
            x->release, vals[0], vals[1], vals[2], src);
}

static void check_rdma_core(dctx_t *x)
{
    const gw_doctor_env_t *e = x->env;
    int ibdev = 0; /* NICs libibverbs registers for: verbs ones, and EFA under libfabric's efa provider */
    for (int k = 0; k < x->topo->nnic; k++)
        ibdev += strcmp(gw_topo_nic(x->topo, k)->fabric, "cxi") != 0;
    if (!x->topo->nnic) {
        add(x, "rdma_core.dmabuf", "", GW_VERDICT_SKIP, "", "no RDMA device");
    } else if (!ibdev) {
        add(x, "rdma_core.dmabuf", "", GW_VERDICT_SKIP, "", "no RDMA device: CXI NICs register through "
            "libfabric's cxi provider, not libibverbs");
    } else if (x->verbs_state < 0) {
        add(x, "rdma_core.dmabuf", "", GW_VERDICT_SKIP, "", "%s",
            e->verbs_absent_why ? e->verbs_absent_why : "built without the verbs loader");
    } else if (x->verbs_state == 0) {
        add(x, "rdma_core.dmabuf", "", GW_VERDICT_FAIL,
            "install rdma-core's libibverbs1 and ibverbs-providers (or set GPUWIRE_IB_LIB)",
            "libibverbs unusable: %s", x->verbs_why);
    } else if (x->verbs.has_reg_dmabuf_mr) {
        add(x, "rdma_core.dmabuf", "", GW_VERDICT_PASS, "", "%s exports ibv_reg_dmabuf_mr",
            x->verbs.library);
    } else {
        add(x, "rdma_core.dmabuf", "", GW_VERDICT_WARN, "upgrade rdma-core to v34 or newer",
            "%s lacks ibv_reg_dmabuf_mr (rdma-core < 34): only the nvidia-peermem path can register GPU memory",
            x->verbs.library);
    }
}

/* NIC drivers known to register dma-buf memory regions, and since when. */
static const struct {
    const char *driver;
    int maj, min;
} dmabuf_drivers[] = {
    {"mlx5_core", 5, 12},
    {"efa", 5, 15},
};

static void check_nic_dmabuf(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    for (int k = 0; k < t->nnic; k++) {
        const gw_topo_dev_t *d = gw_topo_nic(t, k);
        if (!d->driver[0]) {
            add(x, "nic.dmabuf", d->name, GW_VERDICT_UNKNOWN, "the live test (live.gdr) decides",
                "driver of %s unknown (%s)", d->name, d->note[0] ? d->note : "no driver link");
            continue;
        }
        int known = -1;
        for (size_t i = 0; i < GW_ARRAY_SIZE(dmabuf_drivers); i++)
            if (!strcmp(d->driver, dmabuf_drivers[i].driver))
                known = (int)i;
        if (known < 0) {
            add(x, "nic.dmabuf", d->name, GW_VERDICT_UNKNOWN, "the live test (live.gdr) decides",
                "driver %s: not known to gpuwire to support dma-buf memory regions", d->driver);
        } else if (x->kmaj < 0) {
            add(x, "nic.dmabuf", d->name, GW_VERDICT_UNKNOWN, "",
                "driver %s supports dma-buf since Linux %d.%d, kernel release unknown: %s", d->driver,
                dmabuf_drivers[known].maj, dmabuf_drivers[known].min, x->release_why);
        } else if (kernel_at_least(x, dmabuf_drivers[known].maj, dmabuf_drivers[known].min)) {
            add(x, "nic.dmabuf", d->name, GW_VERDICT_PASS, "",
                "driver %s supports dma-buf memory regions since Linux %d.%d; kernel %s", d->driver,
                dmabuf_drivers[known].maj, dmabuf_drivers[known].min, x->release);
        } else {
            add(x, "nic.dmabuf", d->name, GW_VERDICT_FAIL, "upgrade the kernel, or load nvidia-peermem",
                "driver %s supports dma-buf only from Linux %d.%d; kernel %s", d->driver,
                dmabuf_drivers[known].maj, dmabuf_drivers[known].min, x->release);
        }
    }
}

static void check_peermem(dctx_t *x)
{
    if (!x->topo->ngpu) {
        add(x, "gpu.peermem", "", GW_VERDICT_SKIP, "", "no NVIDIA GPU in sysfs");
        return;
    }
    static const char *const mods[] = {"nvidia_peermem", "nv_peer_mem"};
    char path[700];
    for (size_t i = 0; i < GW_ARRAY_SIZE(mods); i++) {
        struct stat st;
        snprintf(path, sizeof(path), "%s/module/%s", x->sys, mods[i]);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            add(x, "gpu.peermem", "", GW_VERDICT_PASS, "", "%s loaded (%s)", mods[i], path);
            return;
        }
    }
    snprintf(path, sizeof(path), "%s/modules", x->proc);
    FILE *f = fopen(path, "re");
    if (!f) {
        add(x, "gpu.peermem", "", GW_VERDICT_UNKNOWN, "",
            "nvidia_peermem not in %s/module, and %s unreadable: %s", x->sys, path, strerror(errno));
        return;
    }
    char line[512];
    int found = -1, lines = 0;
    while (fgets(line, sizeof(line), f)) {
        lines++;
        for (size_t i = 0; i < GW_ARRAY_SIZE(mods); i++) {
            size_t l = strlen(mods[i]);
            if (!strncmp(line, mods[i], l) && line[l] == ' ')
                found = (int)i;
        }
    }
    fclose(f);
    if (found >= 0)
        add(x, "gpu.peermem", "", GW_VERDICT_PASS, "", "%s listed in %s", mods[found], path);
    else if (lines == 0)
        add(x, "gpu.peermem", "", GW_VERDICT_UNKNOWN, "", "%s is empty (modules hidden from this container?)",
            path);
    else
        add(x, "gpu.peermem", "", GW_VERDICT_WARN,
            "modprobe nvidia-peermem (ships with the driver; add it to /etc/modules-load.d), unless dma-buf works",
            "nvidia_peermem not loaded (%s, %s/module): GPU memory can reach the NIC only through dma-buf",
            path, x->sys);
}

static void check_paths(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    for (int g = 0; g < t->ngpu; g++) {
        char obj[64];
        gpu_obj(&t->dev[g], obj, sizeof(obj));
        if (!t->nnic) {
            add(x, "pcie.path", obj, GW_VERDICT_SKIP, "", "no RDMA device");
            add(x, "pcie.acs", obj, GW_VERDICT_SKIP, "", "no RDMA device");
            continue;
        }
        if (!t->nnearest[g]) {
            char ev[700] = "";
            for (int k = 0; k < t->nnic; k++) {
                const gw_topo_dev_t *nd = gw_topo_nic(t, k);
                size_t m = strlen(ev);
                snprintf(ev + m, sizeof(ev) - m, "%s%s: %s", m ? "; " : "", nd->name,
                         nd->note[0] ? nd->note : t->dev[g].note[0] ? t->dev[g].note : "path unknown");
            }
            add(x, "pcie.path", obj, GW_VERDICT_UNKNOWN, "", "PCIe path to every NIC unknown: %s", ev);
            add(x, "pcie.acs", obj, GW_VERDICT_UNKNOWN, "", "no NIC with a known PCIe path");
            continue;
        }
        int k = t->nearest[g][0];
        gw_topo_link_t l = t->link[g][k];
        const gw_topo_dev_t *nic = &t->dev[k];
        char ev[700];
        snprintf(ev, sizeof(ev), "nearest NIC %s %s: %s", nic->name, nic->bdf, gw_topo_link_name(l));
        for (int i = 1; i < t->nnearest[g]; i++) {
            size_t n = strlen(ev);
            snprintf(ev + n, sizeof(ev) - n, ", also %s", t->dev[t->nearest[g][i]].name);
        }
        const char *far_fix = "place GPU and NIC under one PCIe switch, or use the NIC of the GPU's NUMA node (GPUWIRE_IB_DEVICE)";
        switch (l) {
        case GW_LINK_PIX:
        case GW_LINK_PXB:
            add(x, "pcie.path", obj, GW_VERDICT_PASS, "", "%s (same PCIe switch tree)", ev);
            break;
        case GW_LINK_PHB:
            add(x, "pcie.path", obj, GW_VERDICT_WARN, far_fix,
                "%s: peer-to-peer goes through the CPU's root complex; bandwidth depends on the CPU", ev);
            break;
        default:
            add(x, "pcie.path", obj, GW_VERDICT_FAIL, far_fix,
                "%s: peer-to-peer would cross root complexes%s; most CPUs do not forward it well, and NCCL disables GPUDirect RDMA there",
                ev, l == GW_LINK_SYS ? " and NUMA nodes" : "");
            break;
        }

        /* ACS on the bridges between them */
        const gw_topo_bridge_t *path[2 * GW_TOPO_MAX_CHAIN];
        int n = gw_topo_path_bridges(t, g, k, path, (int)GW_ARRAY_SIZE(path));
        if (n == 0) {
            add(x, "pcie.acs", obj, GW_VERDICT_SKIP, "",
                "no shared PCIe bridge with %s (%s): traffic goes through the root complex anyway",
                nic->name, gw_topo_link_name(l));
            continue;
        }
        char blocked[700] = "", unknown[700] = "", fine[700] = "", fixbuf[256] = "";
        for (int i = 0; i < n; i++) {
            char rel[600], why[256];
            uint8_t cfg[4096];
            uint16_t caps = 0, ctrl = 0;
            int off = 0;
            snprintf(rel, sizeof(rel), "%s/config", path[i]->sysdir);
            long len = gw_sysfs_read_bin(x->sys, rel, cfg, sizeof(cfg), why, sizeof(why));
            int r = len < 0 ? -1 : gw_pcicfg_acs(cfg, len, &caps, &ctrl, &off, why, sizeof(why));
            size_t m;
            if (r < 0) {
                m = strlen(unknown);
                snprintf(unknown + m, sizeof(unknown) - m, "%s%s: %s", m ? "; " : "", path[i]->bdf, why);
            } else if (r == 0) {
                m = strlen(fine);
                snprintf(fine + m, sizeof(fine) - m, "%s%s: %s", m ? "; " : "", path[i]->bdf, why);
            } else if (ctrl & GW_ACS_P2P_BLOCKING) {
                m = strlen(blocked);
                snprintf(blocked + m, sizeof(blocked) - m, "%s%s: ACS control 0x%04x at 0x%x:%s%s%s",
                         m ? "; " : "", path[i]->bdf, ctrl, off, ctrl & GW_ACS_RR ? " ReqRedir" : "",
                         ctrl & GW_ACS_CR ? " CmpltRedir" : "", ctrl & GW_ACS_EC ? " EgressCtrl" : "");
                m = strlen(fixbuf);
                snprintf(fixbuf + m, sizeof(fixbuf) - m, "%ssetpci -s %s ECAP_ACS+0x6.w=0000",
                         m ? "; " : "", path[i]->bdf);
            } else {
                m = strlen(fine);
                snprintf(fine + m, sizeof(fine) - m, "%s%s: ACS control 0x%04x", m ? "; " : "",
                         path[i]->bdf, ctrl);
            }
        }
        if (blocked[0]) {
            char fx[256];
            snprintf(fx, sizeof(fx), "%.190s (until reboot), or disable ACS in the BIOS", fixbuf);
            add(x, "pcie.acs", obj, GW_VERDICT_FAIL, fx,
                "ACS redirects peer-to-peer to the root complex on the way to %s: %s", nic->name, blocked);
        } else if (unknown[0]) {
            add(x, "pcie.acs", obj, GW_VERDICT_UNKNOWN, "run as root to read extended config space",
                "path to %s: %s%s%s", nic->name, unknown, fine[0] ? "; " : "", fine);
        } else {
            add(x, "pcie.acs", obj, GW_VERDICT_PASS, "", "no ACS redirect between it and %s: %s",
                nic->name, fine);
        }
    }
}

static void check_iommu(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    char cmd[4096] = "", why[512], rel[700], buf[64], ev[700] = "", cmdl[256] = "";
    if (gw_sysfs_read(x->proc, "cmdline", cmd, sizeof(cmd), why, sizeof(why)) >= 0) {
        char *save = NULL;
        for (char *tok = strtok_r(cmd, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            if (!strstr(tok, "iommu"))
                continue;
            size_t m = strlen(cmdl);
            snprintf(cmdl + m, sizeof(cmdl) - m, "%s%.60s", m ? " " : "", tok);
        }
    }
    int units = -1;
    DIR *d;
    snprintf(rel, sizeof(rel), "%s/class/iommu", x->sys);
    if ((d = opendir(rel))) {
        struct dirent *e;
        units = 0;
        while ((e = readdir(d)))
            units += e->d_name[0] != '.';
        closedir(d);
    }
    int translated = 0, identity = 0, none = 0, unreadable = 0;
    for (int i = 0; i < t->ngpu + t->nnic; i++) {
        const gw_topo_dev_t *dv = &t->dev[i];
        if (!dv->sysdir[0] || !dv->bdf[0])
            continue;
        char grp[512];
        snprintf(rel, sizeof(rel), "%s/iommu_group", dv->sysdir);
        if (gw_sysfs_resolve(x->sys, rel, grp, sizeof(grp), why, sizeof(why)) < 0) {
            none++;
            continue;
        }
        snprintf(rel, sizeof(rel), "%s/type", grp);
        size_t m = strlen(ev);
        if (gw_sysfs_read(x->sys, rel, buf, sizeof(buf), why, sizeof(why)) < 0) {
            unreadable++;
            snprintf(ev + m, sizeof(ev) - m, "%s%s group type unreadable", m ? ", " : "", dv->name);
            continue;
        }
        if (!strcmp(buf, "identity"))
            identity++;
        else
            translated++;
        snprintf(ev + m, sizeof(ev) - m, "%s%s %s", m ? ", " : "", dv->name, buf);
    }
    const char *fix = "boot with iommu=pt (intel_iommu=on iommu=pt / amd_iommu=on iommu=pt), or disable the IOMMU";
    if (translated)
        add(x, "iommu", "", GW_VERDICT_WARN, fix,
            "IOMMU translates DMA (%s); cmdline: %s: NIC-to-GPU peer-to-peer then needs ATS or goes through the root complex, often failing",
            ev, cmdl[0] ? cmdl : "no iommu option");
    else if (unreadable)
        add(x, "iommu", "", GW_VERDICT_UNKNOWN, "", "%s", ev);
    else if (identity)
        add(x, "iommu", "", GW_VERDICT_PASS, "", "IOMMU in passthrough mode (%s); cmdline: %s", ev,
            cmdl[0] ? cmdl : "no iommu option");
    else if (units == 0)
        add(x, "iommu", "", GW_VERDICT_PASS, "", "no IOMMU (%s/class/iommu empty%s)", x->sys,
            none ? ", devices in no IOMMU group" : "");
    else if (units < 0)
        add(x, "iommu", "", GW_VERDICT_UNKNOWN, "", "%s/class/iommu unreadable; cmdline: %s", x->sys,
            cmdl[0] ? cmdl : "no iommu option");
    else if (t->ngpu + t->nnic == 0)
        add(x, "iommu", "", GW_VERDICT_SKIP, "", "%d IOMMU unit(s); no GPU or NIC to check", units);
    else
        add(x, "iommu", "", GW_VERDICT_UNKNOWN, "",
            "%d IOMMU unit(s) but no IOMMU group for the GPUs/NICs; cmdline: %s", units,
            cmdl[0] ? cmdl : "no iommu option");
}

static void check_bar1(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    char need[32], have[32];
    fmt_size(x->reg_bytes, need, sizeof(need));
    for (int g = 0; g < t->ngpu; g++) {
        char obj[64];
        const gw_topo_dev_t *d = &t->dev[g];
        gpu_obj(d, obj, sizeof(obj));
        if (!d->bar1_size) {
            const char *why = strstr(d->note, "BAR1 unknown");
            add(x, "gpu.bar1", obj, GW_VERDICT_UNKNOWN, "", "%s", why ? why : "BAR1 size unknown");
            continue;
        }
        fmt_size(d->bar1_size, have, sizeof(have));
        if (d->bar1_size >= x->reg_bytes)
            add(x, "gpu.bar1", obj, GW_VERDICT_PASS, "", "BAR1 %s >= %s to register", have, need);
        else
            add(x, "gpu.bar1", obj, GW_VERDICT_FAIL,
                "enable Above-4G decoding and Resizable BAR in the BIOS (or the VM's large-BAR option), or register less",
                "BAR1 %s < %s to register: GPU memory registered for RDMA is mapped through BAR1", have, need);
    }
}

static void check_memlock(dctx_t *x)
{
    uint64_t bytes = 0;
    char why[256] = "", need[32], have[32];
    int r;
    if (x->env->memlock) {
        r = x->env->memlock(x->env->arg, &bytes, why, sizeof(why));
    } else {
        struct rlimit rl;
        r = getrlimit(RLIMIT_MEMLOCK, &rl);
        if (r == 0)
            bytes = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
        else
            snprintf(why, sizeof(why), "getrlimit(RLIMIT_MEMLOCK) failed: %s", strerror(errno));
    }
    if (r != 0) {
        add(x, "memlock", "", GW_VERDICT_UNKNOWN, "", "%s", why);
        return;
    }
    fmt_size(x->reg_bytes, need, sizeof(need));
    const char *fix = "ulimit -l unlimited (limits.conf: * - memlock unlimited; docker: --ulimit memlock=-1)";
    if (bytes == UINT64_MAX) {
        add(x, "memlock", "", GW_VERDICT_PASS, "", "RLIMIT_MEMLOCK unlimited");
        return;
    }
    fmt_size(bytes, have, sizeof(have));
    if (bytes >= x->reg_bytes)
        add(x, "memlock", "", GW_VERDICT_PASS, "", "RLIMIT_MEMLOCK %s >= %s", have, need);
    else
        add(x, "memlock", "", GW_VERDICT_WARN, fix,
            "RLIMIT_MEMLOCK %s < %s: host registrations past it fail with GW_ERR_MEMLOCK", have, need);
}

static int verbs_mtu(const dctx_t *x, const char *dev, int port)
{
    if (x->verbs_state != 1)
        return 0;
    for (int i = 0; i < x->verbs.nports && i < 64; i++)
        if (!strcmp(x->verbs.port[i].dev, dev) && x->verbs.port[i].port == port)
            return x->verbs.port[i].active_mtu;
    return 0;
}

static void check_ports(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    int any_active = 0;
    for (int k = 0; k < t->nnic; k++)
        for (int p = 0; p < gw_topo_nic(t, k)->nports; p++)
            any_active |= gw_topo_nic(t, k)->ports[p].state == 4;
    for (int k = 0; k < t->nnic; k++) {
        const gw_topo_dev_t *d = gw_topo_nic(t, k);
        if (!d->nports)
            add(x, "nic.port", d->name, GW_VERDICT_UNKNOWN, "", "no ports listed: %s", d->note);
        for (int p = 0; p < d->nports; p++) {
            const gw_topo_port_t *pt = &d->ports[p];
            char obj[64];
            snprintf(obj, sizeof(obj), "%s:%d", d->name, pt->num);
            int ib = !strcmp(pt->link_layer, "InfiniBand");
            int eth = !strcmp(pt->link_layer, "Ethernet");
            if (pt->state < 0) {
                add(x, "nic.port", obj, GW_VERDICT_UNKNOWN, "", "%s", pt->note);
            } else if (pt->state == 4) {
                add(x, "nic.port", obj, GW_VERDICT_PASS, "", "%s, %s, %s, %s", pt->state_str,
                    pt->phys_state_str[0] ? pt->phys_state_str : "phys state ?",
                    pt->link_layer[0] ? pt->link_layer : "link layer ?", pt->rate[0] ? pt->rate : "rate ?");
            } else {
                const char *fix = ib && pt->state == 2
                                      ? "start a subnet manager on the fabric (opensm) or check the switch's SM"
                                      : "check the cable and the switch port; for RoCE: ip link set <netdev> up";
                add(x, "nic.port", obj, any_active ? GW_VERDICT_WARN : GW_VERDICT_FAIL, fix,
                    "%s, %s, %s%s", pt->state_str[0] ? pt->state_str : "not active",
                    pt->phys_state_str[0] ? pt->phys_state_str : "phys state ?",
                    pt->link_layer[0] ? pt->link_layer : "link layer ?",
                    any_active ? " (other ports are active)" : " (no active port on any NIC)");
            }
            if (pt->state != 4) {
                add(x, "nic.mtu", obj, GW_VERDICT_SKIP, "", "port not active");
                add(x, "nic.gid", obj, GW_VERDICT_SKIP, "", "port not active");
                continue;
            }
            if (!gw_topo_nic_verbs(d)) {
                /* EFA's SRD and Slingshot carry their own transport: no RoCE
                 * GID, and the path MTU is the provider's, not a setting */
                add(x, "nic.mtu", obj, GW_VERDICT_SKIP, "", "%s NIC: reached through libfabric's %s provider, "
                    "which sizes its own packets%s", d->fabric, d->fabric,
                    pt->netdev_mtu > 0 ? " (the netdev's MTU is the host stack's)" : "");
                add(x, "nic.gid", obj, GW_VERDICT_SKIP, "", "%s NIC: addressed through libfabric's address "
                    "vector, no RoCE GID needed", d->fabric);
                continue;
            }
            /* MTU */
            int amtu = verbs_mtu(x, d->name, pt->num);
            if (amtu > 0) {
                add(x, "nic.mtu", obj, amtu >= 4096 ? GW_VERDICT_PASS : GW_VERDICT_WARN,
                    amtu >= 4096 ? "" : (eth ? "raise the netdev MTU to 9000 (and on the switch)"
                                             : "raise the fabric MTU to 4096 (subnet manager partition config)"),
                    "active MTU %d (libibverbs)%s", amtu, amtu >= 4096 ? "" : ": large transfers pay more per-packet overhead");
            } else if (eth && pt->netdev_mtu > 0) {
                /* RoCE: the path MTU is the largest IB MTU that fits the netdev's */
                int roce = pt->netdev_mtu >= 4200 ? 4096 : pt->netdev_mtu >= 2100 ? 2048 : 1024;
                char fx[128];
                snprintf(fx, sizeof(fx), "ip link set dev %s mtu 9000 (and on the switch)", pt->netdev);
                add(x, "nic.mtu", obj, roce >= 4096 ? GW_VERDICT_PASS : GW_VERDICT_WARN, roce >= 4096 ? "" : fx,
                    "netdev %s MTU %d: RoCE path MTU %d", pt->netdev, pt->netdev_mtu, roce);
            } else if (eth) {
                add(x, "nic.mtu", obj, GW_VERDICT_UNKNOWN, "", "RoCE port without a readable netdev MTU: %s",
                    pt->note[0] ? pt->note : "no netdev behind GID 0");
            } else {
                add(x, "nic.mtu", obj, GW_VERDICT_UNKNOWN, "",
                    "the active MTU of an InfiniBand port is not in sysfs; it needs libibverbs (%s)",
                    x->verbs_state < 0 ? (x->env->verbs_absent_why ? x->env->verbs_absent_why
                                                                    : "built without the verbs loader")
                                       : x->verbs_why[0] ? x->verbs_why : "port not reported");
            }
            /* GIDs */
            if (ib) {
                add(x, "nic.gid", obj, GW_VERDICT_SKIP, "", "InfiniBand port: addressed by LID, no RoCE GID needed");
            } else if (pt->n_gids < 0) {
                add(x, "nic.gid", obj, GW_VERDICT_UNKNOWN, "", "%s", pt->note);
            } else if (pt->n_rocev2 > 0) {
                add(x, "nic.gid", obj, GW_VERDICT_PASS, "", "%d GID(s), %d RoCE v2 (netdev %s)", pt->n_gids,
                    pt->n_rocev2, pt->netdev[0] ? pt->netdev : "?");
            } else if (pt->n_gids > 0) {
                add(x, "nic.gid", obj, GW_VERDICT_WARN, "enable RoCE v2 (cma_roce_mode / NIC firmware setting)",
                    "%d GID(s), none RoCE v2: RoCE v1 is not routable", pt->n_gids);
            } else {
                char fx[128];
                snprintf(fx, sizeof(fx), "give %s an IP address (RoCE GIDs follow the netdev's addresses)",
                         pt->netdev[0] ? pt->netdev : d->nnetdevs ? d->netdevs[0] : "the netdev");
                add(x, "nic.gid", obj, GW_VERDICT_FAIL, fx, "no GID on this %s port",
                    eth ? "RoCE" : "(link layer unknown)");
            }
        }
    }
}

/* A NIC the verbs transport cannot drive needs libfabric's provider for it,
 * with FI_HMEM for GPU memory (GPUDirect through the provider). */
static void check_ofi(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    const gw_doctor_env_t *e = x->env;
    int has_hook = e->size >= offsetof(gw_doctor_env_t, ofi_absent_why) + sizeof(char *) && e->ofi_query;
    for (int k = 0; k < t->nnic; k++) {
        const gw_topo_dev_t *d = gw_topo_nic(t, k);
        if (gw_topo_nic_verbs(d))
            continue;
        if (!has_hook) {
            add(x, "ofi.provider", d->name, GW_VERDICT_SKIP, "", "%s",
                e->size >= offsetof(gw_doctor_env_t, ofi_absent_why) + sizeof(char *) && e->ofi_absent_why
                    ? e->ofi_absent_why : "built without the ofi transport");
            continue;
        }
        char dom[128] = "", why[512] = "";
        int hmem = 0;
        int r = e->ofi_query(e->arg, d->fabric, d->name, dom, sizeof(dom), &hmem, why, sizeof(why));
        if (r < 0) {
            add(x, "ofi.provider", d->name, GW_VERDICT_FAIL,
                "install libfabric with its provider for this NIC (AWS: the EFA installer; HPE: the Slingshot "
                "host software), or name it in GPUWIRE_OFI_LIB",
                "%s NIC without libfabric: %s", d->fabric, why);
        } else if (r == 0) {
            add(x, "ofi.provider", d->name, GW_VERDICT_FAIL,
                "install a libfabric built with the provider (fi_info -p <provider> lists its domains)",
                "libfabric's %s provider offers no RDM endpoint with messages and RMA on %s: %s", d->fabric,
                d->name, why);
        } else if (!hmem && t->ngpu) {
            add(x, "ofi.provider", d->name, GW_VERDICT_WARN,
                "use a libfabric built with CUDA support (the EFA installer's is): without FI_HMEM GPU memory "
                "does not go over this NIC",
                "libfabric's %s provider answers on domain %s, but without FI_HMEM", d->fabric, dom);
        } else {
            add(x, "ofi.provider", d->name, GW_VERDICT_PASS, "", "libfabric's %s provider answers on domain %s%s",
                d->fabric, dom, hmem ? ", with FI_HMEM (GPU memory through the provider)" : "");
        }
    }
}

static void check_live(dctx_t *x)
{
    gw_topo_t *t = x->topo;
    const gw_doctor_env_t *e = x->env;
    for (int k = 0; k < t->nnic; k++) {
        const gw_topo_dev_t *nic = gw_topo_nic(t, k);
        int port = -1;
        for (int p = 0; p < nic->nports && port < 0; p++)
            if (nic->ports[p].state == 4)
                port = nic->ports[p].num;
        char obj[64];
        snprintf(obj, sizeof(obj), "%s", nic->name);
        if (!t->ngpu) {
            add(x, "live.gdr", obj, GW_VERDICT_SKIP, "", "no NVIDIA GPU");
            continue;
        }
        if (port < 0) {
            add(x, "live.gdr", obj, GW_VERDICT_SKIP, "", "no active port");
            continue;
        }
        if (!gw_topo_nic_verbs(nic)) {
            add(x, "live.gdr", obj, GW_VERDICT_SKIP, "", "the live test registers through libibverbs; this NIC (%s) "
                "moves GPU memory through libfabric: `GPUWIRE_TRANSPORTS=ofi gpuwire perf --mem cuda` between "
                "two hosts tests that path", nic->fabric);
            continue;
        }
        if (!e->live_test) {
            add(x, "live.gdr", obj, GW_VERDICT_SKIP, "", "%s",
                e->live_absent_why ? e->live_absent_why : "built without the live test (needs CUDA and verbs)");
            continue;
        }
        /* the GPU nearest this NIC */
        int best = 0;
        for (int g = 1; g < t->ngpu; g++)
            if (t->link[g][t->ngpu + k] < t->link[best][t->ngpu + k])
                best = g;
        char ev[768] = "", fx[256] = "";
        gw_verdict_t v = e->live_test(e->arg, &t->dev[best], nic, port, ev, sizeof(ev), fx, sizeof(fx));
        snprintf(obj, sizeof(obj), "%s:%d - %s %s", nic->name, port, t->dev[best].name, t->dev[best].bdf);
        add(x, "live.gdr", obj, v, fx, "%s", ev[0] ? ev : "(the test gave no evidence)");
    }
}

gw_status_t gw_doctor_run(const gw_doctor_env_t *env, gw_doctor_report_t *rep)
{
    static const gw_doctor_env_t defaults = {.size = sizeof(gw_doctor_env_t)};
    if (!env)
        env = &defaults;
    dctx_t *x = calloc(1, sizeof(*x));
    if (!x)
        return GW_ERR_NOMEM;
    x->env = env;
    x->rep = rep;
    x->sys = env->sysfs_root ? env->sysfs_root : gw_settings_sysfs_root(NULL);
    x->proc = env->proc_root ? env->proc_root : "/proc";
    x->boot = env->boot_dir ? env->boot_dir : "/boot";
    x->reg_bytes = env->register_bytes ? env->register_bytes : GIB;

    const gw_topo_opts_t *to = env->topo_opts.size ? &env->topo_opts : NULL;
    if (gw_topo_create(x->sys, to, &x->topo, x->topo_err, sizeof(x->topo_err)) != GW_OK) {
        add(x, "topology", "", GW_VERDICT_FAIL, "set GPUWIRE_SYSFS_ROOT to a sysfs tree (default /sys)",
            "%s", x->topo_err);
        goto out;
    }
    read_release(x);
    x->cuda_state = -1;
    if (env->cuda_query && x->topo->ngpu)
        x->cuda_state = env->cuda_query(env->arg, &x->cuda, x->cuda_why, sizeof(x->cuda_why)) == 0;
    x->verbs_state = -1;
    if (env->verbs_query && x->topo->nnic)
        x->verbs_state = env->verbs_query(env->arg, &x->verbs, x->verbs_why, sizeof(x->verbs_why)) == 0;

    check_presence(x);
    check_cuda(x);
    check_peermem(x);
    check_kernel_dmabuf(x);
    check_rdma_core(x);
    check_nic_dmabuf(x);
    check_paths(x);
    check_iommu(x);
    check_bar1(x);
    check_memlock(x);
    check_ports(x);
    check_ofi(x);
    check_live(x);
out:;
    gw_status_t st = x->nomem ? GW_ERR_NOMEM : GW_OK;
    gw_topo_destroy(x->topo);
    free(x);
    return st;
}

void gw_doctor_report_free(gw_doctor_report_t *rep)
{
    if (!rep)
        return;
    free(rep->checks);
    rep->checks = NULL;
    rep->n = rep->cap = 0;
}

int gw_doctor_exit_code(const gw_doctor_report_t *rep)
{
    int code = 0;
    for (int i = 0; i < rep->n; i++) {
        gw_verdict_t v = rep->checks[i].verdict;
        if (v == GW_VERDICT_FAIL)
            return 2;
        if (v == GW_VERDICT_WARN || v == GW_VERDICT_UNKNOWN)
            code = 1;
    }
    return code;
}

const gw_check_t *gw_doctor_find(const gw_doctor_report_t *rep, const char *name,
                                 const char *object_prefix)
{
    for (int i = 0; i < rep->n; i++) {
        const gw_check_t *c = &rep->checks[i];
        if (strcmp(c->name, name) != 0)
            continue;
        if (object_prefix && strncmp(c->object, object_prefix, strlen(object_prefix)) != 0)
            continue;
        return c;
    }
    return NULL;
}

void gw_doctor_print(const gw_doctor_report_t *rep, FILE *f, int verbose)
{
    int count[5] = {0};
    for (int i = 0; i < rep->n; i++) {
        const gw_check_t *c = &rep->checks[i];
        count[c->verdict]++;
        if (!verbose && c->verdict == GW_VERDICT_SKIP)
            continue;
        char up[8];
        const char *vn = gw_verdict_name(c->verdict);
        size_t j = 0;
        for (; vn[j] && j < sizeof(up) - 1; j++)
            up[j] = (char)toupper((unsigned char)vn[j]);
        up[j] = '\0';
        fprintf(f, "%-7s %-16s %s%s%s\n", up, c->name, c->object, c->object[0] ? ": " : "", c->evidence);
        if (c->fix[0] && c->verdict != GW_VERDICT_PASS && c->verdict != GW_VERDICT_SKIP)
            fprintf(f, "        %-16s fix: %s\n", "", c->fix);
    }
    fprintf(f, "\n%d pass, %d warn, %d fail, %d unknown, %d skip%s -> exit %d\n", count[GW_VERDICT_PASS],
            count[GW_VERDICT_WARN], count[GW_VERDICT_FAIL], count[GW_VERDICT_UNKNOWN],
            count[GW_VERDICT_SKIP], verbose ? "" : " (-v lists the skipped checks)",
            gw_doctor_exit_code(rep));
}

void gw_doctor_print_json(const gw_doctor_report_t *rep, FILE *f)
{
    int count[5] = {0};
    for (int i = 0; i < rep->n; i++)
        count[rep->checks[i].verdict]++;
    fprintf(f, "{\"exit_code\":%d,\"summary\":{\"pass\":%d,\"warn\":%d,\"fail\":%d,\"unknown\":%d,\"skip\":%d},\"checks\":[",
            gw_doctor_exit_code(rep), count[GW_VERDICT_PASS], count[GW_VERDICT_WARN],
            count[GW_VERDICT_FAIL], count[GW_VERDICT_UNKNOWN], count[GW_VERDICT_SKIP]);
    for (int i = 0; i < rep->n; i++) {
        const gw_check_t *c = &rep->checks[i];
        fprintf(f, "%s\n{\"name\":", i ? "," : "");
        gw_json_str(f, c->name);
        fprintf(f, ",\"object\":");
        gw_json_str(f, c->object);
        fprintf(f, ",\"verdict\":");
        gw_json_str(f, gw_verdict_name(c->verdict));
        fprintf(f, ",\"evidence\":");
        gw_json_str(f, c->evidence);
        fprintf(f, ",\"fix\":");
        gw_json_str(f, c->fix);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}
