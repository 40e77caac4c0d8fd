/* SPDX-License-Identifier: Apache-2.0 */
/* gw_nccl.c - libnccl-net-gpuwire.so: NCCL's network plugin interface
 * (ncclNetPlugin_v8 .. _v12) over gpuwire's public API.
 *
 * Mapping (docs/NCCL.md has the user's view):
 *   NCCL device   one per active port of a verbs NIC gpuwire's topology
 *                 finds when the verbs transport is usable here; else one
 *                 per active libfabric NIC (EFA, CXI: topology fabric other
 *                 than verbs) when the ofi transport is usable; else one
 *                 "tcp" device.  Each device has its own gw context
 *                 (gw_config_t.ib_device names the NIC and port, which the
 *                 verbs transport opens and the ofi transport takes the
 *                 domain of), created on first use.
 *   listen        gw_listen on the device's address; the handle carries
 *                 magic, version, a random id and "ip:port".
 *   connect       gw_connect (the gpuwire handshake picks the transport,
 *                 bounded by GPUWIRE_CONNECT_TIMEOUT_MS), then a hello
 *                 message carrying the handle's id.
 *   accept        non-blocking: gw_accept with timeout 0, then the hello is
 *                 received and its id checked against the listener's.
 *   isend/irecv   gw_send / gw_recv with NCCL's tag in the low 32 bits (the
 *                 hello uses a tag above them); a multi-receive is n gw_recv
 *                 under one plugin request.
 *   regMr         gw_mem_reg (GPU memory goes through gpuwire's registration
 *                 ladder: dma-buf, peermem, staging).
 *   iflush        nothing to do: gpuwire completes a receive into GPU memory
 *                 only once the data is visible to the GPU, so no request.
 *   test          gw_progress on the comm's context, then the requests.
 *   GPU buffers   gpu_policy() decides per device whether NCCL is led to
 *                 keep its network buffers in GPU memory (NCCL_PTR_CUDA,
 *                 and NCCL_NET_GDR_LEVEL for devices with no NIC-to-GPU
 *                 DMA), from per-transport measurements or
 *                 GPUWIRE_NCCL_GPU_BUFFERS.
 * Every entry point holds one process-wide lock (NCCL calls from its proxy
 * threads and from the thread creating communicators); a ticker thread
 * progresses every context between NCCL's calls (liveness, see ticker()).
 *
 * The NCCL interface versions' tables and shims over these entry points:
 * gw_nccl_abi.c.
 *
 * This file sits above the public API, like tools/: it reads the topology
 * (src/topo) and the CUDA loader for device properties only.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuwire.h"
#include "core/settings.h"
#include "cuda/cuda_wrap.h"
#include "topo/topo.h"

#include "gw_nccl_int.h"
#include "gwn_wire.h"

#define GWN_MAX_DEVS 16
#define GWN_MAX_REQS (NCCL_NET_MAX_REQUESTS * GWN_MAX_RECVS)
#define GWN_HELLO_TAG (1ULL << 62)
#define GWN_TAG_MASK (~0ULL)

_Static_assert(sizeof(gwn_handle_t) <= NCCL_NET_HANDLE_MAXSIZE, "handle exceeds NCCL's size");

typedef struct gwn_dev {
    char name[64];       /* "mlx5_0:1", "tcp(eth0)" */
    char ib_device[48];  /* "mlx5_0:1" for a verbs device, "rdmap16s27:1" for an ofi one, "" for the tcp one */
    int ofi;             /* a libfabric NIC: its context runs without the verbs transport */
    char ifname[IFNAMSIZ];
    char *pci_path;      /* realpath under /sys, NULL for a virtual device */
    int speed;           /* Mb/s */
    int port;
    int ptr_support;
    int gpu_buffers;     /* NCCL is led to GPU buffers on this device */
    char gpu_why[256];   /* why (or why not), for the log */
    gw_context_t *ctx;
} gwn_dev_t;

enum { GWN_LISTEN = 1, GWN_SEND, GWN_RECV };

/* What regMr hands NCCL: the region and the device whose context owns it, so
 * that deregMr does not depend on the comm (NCCL may close it first). */
typedef struct gwn_mr {
    gw_mem_t *mem;
    gwn_dev_t *dev;
} gwn_mr_t;

static gw_mem_t *mr_mem(void *mhandle) { return mhandle ? ((gwn_mr_t *)mhandle)->mem : NULL; }

struct gwn_comm;
typedef struct gwn_req {
    struct gwn_comm *comm;
    struct gwn_req *next_free;
    int n;
    int used;
    gw_request_t *r[GWN_MAX_RECVS];
} gwn_req_t;

typedef struct gwn_comm {
    int kind;
    int devi;
    gwn_dev_t *dev;
    gw_ep_t *ep;
    gw_listener_t *l;          /* listen comm */
    gw_ep_t *pending;          /* listen comm: accepted, hello not yet checked */
    gw_request_t *hello_req;   /* listen comm: the hello receive */
    uint64_t id;
    gwn_hello_t hello;
    char addr[96];
    int flushed_note;          /* iflush explained once per comm */
    int cuda_note;             /* first CUDA registration's path logged */
    gwn_req_t *free_reqs;
    gwn_req_t reqs[];          /* GWN_MAX_REQS for send/recv comms */
} gwn_comm_t;

static struct {
    pthread_mutex_t lock;
    int refs;           /* init() calls not yet finalized (v11) / 1 for v8..v10 */
    int ready;          /* devices discovered */
    ncclDebugLogger_t log;
    int ndev;
    gwn_dev_t dev[GWN_MAX_DEVS];
    char cuda_why[256]; /* why CUDA pointers are not supported, "" when they are */
    char gdr_level_note[160]; /* what init did about NCCL_NET_GDR_LEVEL, for the log */
    int ofi_hmem;       /* the ofi transport moves GPU memory (its provider has FI_HMEM) */
    char transports_no_verbs[128]; /* GPUWIRE_TRANSPORTS less verbs: the list of an ofi device's context */
    int ticker_started;
    int ticker_stop;    /* asks the ticker to return (finalize, unload) */
    pthread_t ticker_thread;
} G = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* NCCL's proxy calls into a comm only while it has operations on it, but a
 * gpuwire peer with outstanding work declares this side dead after
 * GPUWIRE_PEER_TIMEOUT_MS without progress here (a rank that reaches a
 * collective late, a long set-up).  So a thread progresses every context
 * every GWN_TICK_MS, under the plugin's lock like every other call: the
 * contexts stay used by one thread at a time. */
#define GWN_TICK_MS 50
static void *ticker(void *arg)
{
    for (;;) {
        usleep(GWN_TICK_MS * 1000);
        pthread_mutex_lock(&G.lock);
        if (G.ticker_stop) {
            pthread_mutex_unlock(&G.lock);
            break;
        }
        for (int i = 0; i < G.ndev; i++)
            if (G.dev[i].ctx)
                gw_progress(G.dev[i].ctx);
        pthread_mutex_unlock(&G.lock);
    }
    return arg;
}

/* Stops and joins the ticker; called without G.lock held.  It must be gone
 * before NCCL unloads the plugin: NCCL 2.28 dlcloses it after the last
 * finalize, and a ticker still sleeping in unmapped code crashed the
 * process at exit (SIGSEGV in nccl_plugin_nccl_load on an H100). */
static void stop_ticker(void)
{
    pthread_mutex_lock(&G.lock);
    int started = G.ticker_started;
    G.ticker_stop = started;
    pthread_mutex_unlock(&G.lock);
    if (!started)
        return;
    pthread_join(G.ticker_thread, NULL);
    pthread_mutex_lock(&G.lock);
    G.ticker_started = 0;
    G.ticker_stop = 0;
    pthread_mutex_unlock(&G.lock);
}

__attribute__((destructor)) static void gwn_unload(void) { stop_ticker(); }

/* ---- logging through NCCL's logger ---------------------------------------------------------- */
void gwn_log(ncclDebugLogLevel lvl, unsigned long flags, const char *fn, int line, const char *fmt, ...)
{
    char buf[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (G.log)
        G.log(lvl, flags, fn, line, "NET/gpuwire : %s", buf);
    else if (lvl == NCCL_LOG_WARN)
        fprintf(stderr, "NET/gpuwire : %s\n", buf);
}

static ncclResult_t map_status(gw_status_t st)
{
    if (st == GW_OK || st == GW_INPROGRESS)
        return ncclSuccess;
    if (GW_IS_ENDPOINT_ERROR(st))
        return ncclRemoteError;
    switch (st) {
    case GW_ERR_INVALID:
    case GW_ERR_TRUNCATED:
    case GW_ERR_CONFIG:
    case GW_ERR_OUT_OF_BOUNDS:
    case GW_ERR_ACCESS:
        return ncclInvalidUsage;
    case GW_ERR_CUDA:
        return ncclUnhandledCudaError;
    default:
        return ncclSystemError;
    }
}

/* Multi-line path text of gw_mem_query on one line. */
static void one_line(char *s)
{
    size_t n = strlen(s);
    while (n && s[n - 1] == '\n')
        s[--n] = '\0';
    for (char *p = s; *p; p++)
        if (*p == '\n')
            *p = ';';
}

static const char *kind_name(int kind)
{
    return kind == GWN_SEND ? "send" : kind == GWN_RECV ? "recv" : "listen";
}

/* ---- devices ---------------------------------------------------------------------------------- */
static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

/* The interface of the default IPv4 route, "" if none. */
static void default_route_if(char *out, size_t len)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/net/route", "r");
    if (!f)
        return;
    char line[256], ifn[IFNAMSIZ + 1];
    unsigned long dst, flags;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%16s %lx %*x %lx", ifn, &dst, &flags) == 3 && dst == 0 && (flags & 1)) {
            size_t k = strnlen(ifn, len - 1);
            memcpy(out, ifn, k);
            out[k] = '\0';
            break;
        }
    }
    fclose(f);
}

/* IPv4 address of ifname (or of the first non-loopback interface that is up
 * when ifname is ""); 0 on success with the interface used in used_if. */
static int if_ipv4(const char *ifname, char *ip, size_t iplen, char *used_if, size_t uilen)
{
    struct ifaddrs *ifs, *i;
    int rc = -1;
    if (getifaddrs(&ifs) != 0)
        return -1;
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        if (ifname[0] ? strcmp(i->ifa_name, ifname) != 0 : (i->ifa_flags & IFF_LOOPBACK) != 0)
            continue;
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, (socklen_t)iplen);
        snprintf(used_if, uilen, "%s", i->ifa_name);
        rc = 0;
        break;
    }
    freeifaddrs(ifs);
    return rc;
}

/* The PCI function a sysfs device sits on: PATH itself or its nearest
 * ancestor whose "subsystem" link names the pci bus.  A netdev's "device"
 * link often points below the PCI function (virtio: .../0000:00:03.0/virtio2),
 * and NCCL attaches a device whose path is not a PCI device to the CPU.
 * Returns a malloc'd realpath, NULL when no PCI function is above it (a
 * virtual interface: veth, bridge, lo). */
static char *gwn_pci_function_path(const char *path)
{
    char *p = realpath(path, NULL);
    while (p) {
        char sub[PATH_MAX + 16], target[PATH_MAX];
        snprintf(sub, sizeof(sub), "%s/subsystem", p);
        char *t = realpath(sub, target);
        const char *base = t ? strrchr(t, '/') : NULL;
        if (base && strcmp(base, "/pci") == 0 && strrchr(p, '/') && gw_is_bdf(strrchr(p, '/') + 1))
            return p;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p || strstr(p, "/devices") == NULL) {
            free(p);
            return NULL;
        }
        *slash = '\0';
    }
    return NULL;
}

static const char *sysfs_root(gw_context_t *ctx)
{
    const char *r = ctx ? gw_setting_value(ctx, "GPUWIRE_SYSFS_ROOT") : NULL;
    return r && r[0] ? r : "/sys";
}

static void netdev_props(gwn_dev_t *d, const char *root)
{
    char p[PATH_MAX + 64], v[64];
    snprintf(p, sizeof(p), "%s/class/net/%s/device", root, d->ifname);
    d->pci_path = d->ifname[0] ? gwn_pci_function_path(p) : NULL;
    snprintf(p, sizeof(p), "%s/class/net/%s/speed", root, d->ifname);
    long s = (d->ifname[0] && read_small(p, v, sizeof(v)) == 0) ? strtol(v, NULL, 10) : -1;
    d->speed = s > 0 ? (int)s : 10000; /* unknown (virtual NICs report -1): assume 10 Gb/s */
}

/* NIC devices: every ACTIVE port of every NIC in the topology that the
 * verbs transport drives (ofi 0) or that libfabric's provider of its fabric
 * drives through the ofi transport (ofi 1: EFA, CXI).  Returns how many
 * were added. */
static int add_nic_devices(int ofi)
{
    gw_topo_opts_t o;
    gw_topo_t *t = NULL;
    char err[256] = "";
    gw_topo_opts_default(&o);
    if (gw_topo_create(NULL, &o, &t, err, sizeof(err)) != GW_OK) {
        INFO(NCCL_INIT | NCCL_NET, "topology not readable (%s): no %s devices", err, ofi ? "libfabric" : "verbs");
        return 0;
    }
    for (int n = 0; n < t->nnic && G.ndev < GWN_MAX_DEVS; n++) {
        gw_topo_dev_t *nic = gw_topo_nic(t, n);
        if (gw_topo_nic_verbs(nic) == ofi) /* the other kind */
            continue;
        for (int p = 0; p < nic->nports && G.ndev < GWN_MAX_DEVS; p++) {
            gw_topo_port_t *pt = &nic->ports[p];
            if (pt->state != 4)
                continue;
            gwn_dev_t *d = &G.dev[G.ndev++];
            memset(d, 0, sizeof(*d));
            snprintf(d->ib_device, sizeof(d->ib_device), "%s:%d", nic->name, pt->num);
            snprintf(d->name, sizeof(d->name), "%s:%d", nic->name, pt->num);
            snprintf(d->ifname, sizeof(d->ifname), "%s", pt->netdev[0] ? pt->netdev
                                                        : nic->nnetdevs ? nic->netdevs[0] : "");
            char path[PATH_MAX];
            snprintf(path, sizeof(path), "%s%s", t->root, nic->sysdir);
            d->pci_path = nic->bdf[0] ? gwn_pci_function_path(path) : NULL;
            double gbps = strtod(pt->rate, NULL);
            d->speed = gbps > 0 ? (int)(gbps * 1000) : 10000;
            d->port = pt->num;
            d->ofi = ofi;
        }
    }
    gw_topo_destroy(t);
    return G.ndev;
}

/* ---- GPU buffers: the per-transport choice ---------------------------------------------------- *
 * NCCL keeps a net connection's buffers in GPU memory only when the device
 * advertises NCCL_PTR_CUDA and its distance to the GPU is within
 * NCCL_NET_GDR_LEVEL (default PXB); otherwise its kernels write into pinned
 * host memory and the plugin moves that.  Which is faster depends on what
 * gpuwire does with a GPU buffer on the connection's transport, measured
 * against NCCL's host staging (docs/NCCL.md, "GPU buffers"; bench/device/nccl_coll.sh
 * has a row for each choice on each transport):
 *   intra  CUDA IPC, one device-to-device copy: GPU buffers (all_reduce
 *          128 MiB on two GPUs: 28.9 GB/s against 3.46 GB/s host-staged).
 *   tcp    host buffers: gpuwire's pipelined staging of GPU buffers through
 *          its own pinned buffers lost to NCCL's host buffers on every large
 *          collective (two H200s, 256 MiB busbw: all_reduce 5.35 against 6.00
 *          GB/s, broadcast 8.78 against 10.61, alltoall 1.26 against 1.80).
 *   verbs  GPUDirect RDMA (dma-buf or peermem) reads and writes the GPU
 *          directly: GPU buffers where it is possible; without it gpuwire
 *          would stage (one more copy than NCCL's host buffers): host.
 * A device without verbs carries intra and tcp connections (the handshake
 * picks per peer), so it is led to GPU buffers when every transport it may
 * take prefers them: with intra alone in GPUWIRE_TRANSPORTS, not with the
 * default list (tcp in it).  Such a device has no NIC that DMAs to the GPU,
 * so the PCI distance NCCL checks means nothing for it: the plugin sets
 * NCCL_NET_GDR_LEVEL=SYS for the process unless the user set it (NCCL reads
 * it after the plugin's init).  A verbs device reports its NIC's PCI path
 * and leaves the distance rule to NCCL. */
static int transport_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == ' ' || p[n] == '\0'))
            return 1;
        p = strchr(p, ',');
    }
    return 0;
}

/* Whether GPUDirect RDMA can work here: the peermem module is loaded, or
 * the CUDA driver exports dma-buf for device 0. */
static int gpudirect_possible(const char *root, char *why, size_t len)
{
    char p[PATH_MAX + 64];
    struct stat st;
    static const char *const mods[] = {"nvidia_peermem", "nv_peer_mem"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/module/%s", root, mods[i]);
        if (stat(p, &st) == 0) {
            snprintf(why, len, "GPUDirect RDMA through %s", mods[i]);
            return 1;
        }
    }
    char cwhy[128];
    const gw_cuda_t *cu = gw_cuda_get(cwhy, sizeof(cwhy));
    CUdevice dev;
    int v = 0;
    if (cu && cu->cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
        cu->cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == CUDA_SUCCESS && v) {
        snprintf(why, len, "GPUDirect RDMA through dma-buf");
        return 1;
    }
    snprintf(why, len, "no GPUDirect RDMA (no nvidia_peermem module, no dma-buf support in the CUDA driver): "
             "gpuwire would stage GPU buffers through host memory, one copy more than NCCL's host buffers");
    return 0;
}

/* Decides d->gpu_buffers and d->ptr_support.  MODE: GPUWIRE_NCCL_GPU_BUFFERS;
 * TRANSPORTS: GPUWIRE_TRANSPORTS. */
static void gpu_policy(gwn_dev_t *d, const char *mode, const char *transports, const char *root)
{
    d->ptr_support = NCCL_PTR_HOST;
    d->gpu_buffers = 0;
    if (G.cuda_why[0]) {
        snprintf(d->gpu_why, sizeof(d->gpu_why), "host buffers: no CUDA driver (%s)", G.cuda_why);
        return;
    }
    if (mode && strcasecmp(mode, "off") == 0) {
        snprintf(d->gpu_why, sizeof(d->gpu_why), "host buffers: GPUWIRE_NCCL_GPU_BUFFERS=off");
        return;
    }
    if (mode && strcasecmp(mode, "on") == 0) {
        d->gpu_buffers = 1;
        snprintf(d->gpu_why, sizeof(d->gpu_why), "GPU buffers: GPUWIRE_NCCL_GPU_BUFFERS=on");
    } else if (d->ofi) {
        char why[224];
        if (!G.ofi_hmem) {
            snprintf(d->gpu_why, sizeof(d->gpu_why), "host buffers (ofi): the libfabric provider has no FI_HMEM, "
                     "gpuwire would stage GPU buffers through host memory, one copy more than NCCL's host buffers");
        } else {
            d->gpu_buffers = gpudirect_possible(root, why, sizeof(why));
            snprintf(d->gpu_why, sizeof(d->gpu_why), "%s (ofi, FI_HMEM): %s",
                     d->gpu_buffers ? "GPU buffers" : "host buffers", why);
        }
    } else if (d->ib_device[0]) {
        char why[224];
        d->gpu_buffers = gpudirect_possible(root, why, sizeof(why));
        snprintf(d->gpu_why, sizeof(d->gpu_why), "%s (verbs): %s", d->gpu_buffers ? "GPU buffers" : "host buffers",
                 why);
    } else if (transport_listed(transports, "tcp")) {
        /* a tcp connection is possible: host buffers, even if intra would
         * prefer GPU ones (the device is one for every peer) */
        snprintf(d->gpu_why, sizeof(d->gpu_why), "host buffers (tcp: measured faster than gpuwire's staging of "
                 "GPU buffers%s): chosen by measurement (docs/NCCL.md, GPU buffers)",
                 transport_listed(transports, "intra") ? "; GPUWIRE_NCCL_GPU_BUFFERS=on takes GPU buffers" : "");
    } else {
        /* intra alone: GPU buffers move collectives 8-10x faster than the
         * host bounce, but every copy is then a CUDA call on NCCL's proxy
         * thread, and the CUDA driver holds such a call (cuMemcpyAsync, in a
         * read lock) while an application thread sits in a blocking copy
         * that waits on the collective (PyTorch's tensor.item() or .cpu()):
         * the copy that completes the collective never starts.  Seen on two
         * H200s with PyTorch; a program that waits on its streams alone (the
         * C benchmark) never meets it.  So they are taken only on request. */
        snprintf(d->gpu_why, sizeof(d->gpu_why), "%s", transport_listed(transports, "intra")
                 ? "host buffers (intra: GPU buffers need CUDA copies on NCCL's proxy thread, which the driver holds "
                   "behind an application's blocking copy; GPUWIRE_NCCL_GPU_BUFFERS=on takes them; docs/NCCL.md)"
                 : "host buffers: neither intra nor tcp in GPUWIRE_TRANSPORTS");
    }
    if (d->gpu_buffers)
        d->ptr_support |= NCCL_PTR_CUDA;
}

/* For a device whose GPU buffers involve no NIC DMA: NCCL's distance check
 * would refuse them (the device hangs off the CPU), so the level is set for
 * the process unless the user chose one. */
static void lead_gdr_level(void)
{
    int lead = 0;
    for (int i = 0; i < G.ndev; i++)
        lead |= G.dev[i].gpu_buffers && !G.dev[i].ib_device[0];
    G.gdr_level_note[0] = '\0';
    if (!lead)
        return;
    const char *cur = gw_settings_foreign("NCCL_NET_GDR_LEVEL");
    if (cur && cur[0]) {
        snprintf(G.gdr_level_note, sizeof(G.gdr_level_note), "NCCL_NET_GDR_LEVEL=%s kept (set by the user)", cur);
        return;
    }
    if (setenv("NCCL_NET_GDR_LEVEL", "SYS", 0) == 0)
        snprintf(G.gdr_level_note, sizeof(G.gdr_level_note),
                 "NCCL_NET_GDR_LEVEL=SYS set: no NIC DMAs to the GPU on this device, the PCI distance does not apply");
    else
        snprintf(G.gdr_level_note, sizeof(G.gdr_level_note), "setting NCCL_NET_GDR_LEVEL failed: NCCL applies its "
                 "PCI distance rule");
}

static gw_status_t dev_ctx(gwn_dev_t *d)
{
    if (d->ctx)
        return GW_OK;
    /* an ofi device's NIC is no verbs NIC: its context leaves verbs out */
    gw_config_t cfg = {.size = sizeof(cfg), .transports = d->ofi ? G.transports_no_verbs : NULL, .log_level = -1,
                       .ib_device = d->ib_device[0] ? d->ib_device : NULL};
    gw_status_t st = gw_context_create(&cfg, &d->ctx);
    if (st != GW_OK)
        WARN("device %s: gw_context_create failed: %s (gpuwire's own log above says why)", d->name,
             gw_status_name(st));
    return st;
}

/* Runs once per process (under the lock). */
static ncclResult_t discover(void)
{
    gw_context_t *probe = NULL;
    gw_status_t st = gw_context_create(NULL, &probe);
    if (st != GW_OK) {
        WARN("cannot create a gpuwire context: %s; check the GPUWIRE_* settings (gpuwire info)",
             gw_status_name(st));
        return map_status(st);
    }
    char verbs_why[256] = "not compiled into this build", ofi_why[256] = "not compiled into this build";
    int verbs = 0, ofi = 0;
    gw_transport_info_t ti = {.size = sizeof(ti)};
    for (size_t i = 0; gw_transport_at(probe, i, &ti) == GW_OK; i++) {
        if (strcmp(ti.name, "verbs") == 0) {
            verbs = ti.usable;
            snprintf(verbs_why, sizeof(verbs_why), "%s", ti.detail);
        } else if (strcmp(ti.name, "ofi") == 0) {
            ofi = ti.usable;
            snprintf(ofi_why, sizeof(ofi_why), "%s", ti.detail);
        }
        ti.size = sizeof(ti);
    }
    G.ofi_hmem = ofi && strstr(ofi_why, "FI_HMEM") != NULL && strstr(ofi_why, "host memory only") == NULL;
    char why[256];
    G.cuda_why[0] = '\0';
    if (!gw_cuda_get(why, sizeof(why)))
        snprintf(G.cuda_why, sizeof(G.cuda_why), "%s", why);
    G.ndev = 0;
    const char *gmode = gw_setting_value(probe, "GPUWIRE_NCCL_GPU_BUFFERS");
    const char *tlist = gw_setting_value(probe, "GPUWIRE_TRANSPORTS");
    char mode[16], transports[128], root[PATH_MAX];
    snprintf(mode, sizeof(mode), "%s", gmode && gmode[0] ? gmode : "auto");
    snprintf(transports, sizeof(transports), "%s", tlist && tlist[0] ? tlist : "verbs,intra,ofi,tcp");
    snprintf(root, sizeof(root), "%s", sysfs_root(probe));
    G.transports_no_verbs[0] = '\0';
    for (const char *p = transports; *p;) { /* the list less verbs */
        size_t n = strcspn(p, ",");
        if (!(n == 5 && !strncmp(p, "verbs", 5)) && n) {
            size_t u = strlen(G.transports_no_verbs);
            snprintf(G.transports_no_verbs + u, sizeof(G.transports_no_verbs) - u, "%s%.*s", u ? "," : "", (int)n, p);
        }
        p += n;
        p += *p == ',';
    }
    int own_probe = 0;
    if (verbs && add_nic_devices(0) > 0) {
        own_probe = 1;
    } else if (ofi && add_nic_devices(1) > 0) {
        own_probe = 1;
        INFO(NCCL_INIT | NCCL_NET, "no verbs device (%s); %d libfabric device(s): ofi %s", verbs ? "no ACTIVE port "
             "of a verbs NIC in the topology" : verbs_why, G.ndev, ofi_why);
    } else {
        gwn_dev_t *d = &G.dev[G.ndev++];
        memset(d, 0, sizeof(*d));
        char ifn[IFNAMSIZ] = "", ip[64];
        const char *want = gw_setting_value(probe, "GPUWIRE_NCCL_IFNAME");
        if (want && want[0])
            snprintf(ifn, sizeof(ifn), "%s", want);
        else
            default_route_if(ifn, sizeof(ifn));
        if (if_ipv4(ifn, ip, sizeof(ip), d->ifname, sizeof(d->ifname)) != 0)
            d->ifname[0] = '\0';
        snprintf(d->name, sizeof(d->name), "tcp(%s)", d->ifname[0] ? d->ifname : "lo");
        netdev_props(d, sysfs_root(probe));
        d->port = 1;
        d->ctx = probe; /* default config: the probe is this device's context */
        INFO(NCCL_INIT | NCCL_NET, "no verbs or libfabric NIC device: %s%s; ofi: %s; one device %s (the "
             "transports are still negotiated per connection)", verbs ? "no ACTIVE RDMA port in the topology"
             : "verbs: ", verbs ? "" : verbs_why, ofi ? "usable, but no ACTIVE EFA or CXI NIC in the topology"
             : ofi_why, d->name);
    }
    const char *spd = gw_setting_value(probe, "GPUWIRE_NCCL_SPEED");
    long speed = spd && spd[0] ? strtol(spd, NULL, 10) : 0;
    for (int i = 0; i < G.ndev; i++) {
        gwn_dev_t *d = &G.dev[i];
        if (speed > 0)
            d->speed = (int)speed; /* the user's figure over the NIC's */
        gpu_policy(d, mode, transports, root);
        INFO(NCCL_INIT | NCCL_NET, "dev %d %s: pci %s, %d Mb/s, port %d, pointers HOST%s; %s", i, d->name,
             d->pci_path ? d->pci_path : "none (virtual interface: NCCL attaches the device to the CPU)", d->speed,
             d->port, (d->ptr_support & NCCL_PTR_CUDA) ? "|CUDA" : "", d->gpu_why);
    }
    if (own_probe)
        gw_context_destroy(probe);
    lead_gdr_level();
    if (G.gdr_level_note[0])
        INFO(NCCL_INIT | NCCL_NET, "%s", G.gdr_level_note);
    INFO(NCCL_INIT | NCCL_NET, "gpuwire %s (%s): %d device(s); NCCL_PTR_DMABUF not advertised: gpuwire cannot "
         "import NCCL's dma-buf fd, its CUDA registration exports its own dma-buf first", gw_version(),
         gw_build_features(), G.ndev);
    G.ready = 1;
    return ncclSuccess;
}

ncclResult_t gwn_init(ncclDebugLogger_t logfn)
{
    ncclResult_t rc = ncclSuccess;
    pthread_mutex_lock(&G.lock);
    if (logfn)
        G.log = logfn;
    if (!G.ready)
        rc = discover();
    if (rc == ncclSuccess)
        G.refs++;
    if (rc == ncclSuccess && !G.ticker_started) {
        if (pthread_create(&G.ticker_thread, NULL, ticker, NULL) == 0)
            G.ticker_started = 1;
        else
            WARN("cannot start the progress thread: peers may time this process out while NCCL posts no "
                 "operation for longer than GPUWIRE_PEER_TIMEOUT_MS");
    }
    pthread_mutex_unlock(&G.lock);
    if (rc != ncclSuccess)
        /* NCCL logs a failed plugin init only at INFO and falls back to its
         * own transports: say it where it is seen (nccl#959). */
        fprintf(stderr, "gpuwire NCCL plugin: init failed (%s); NCCL falls back to its internal "
                "transports. Run `gpuwire info` and `gpuwire doctor` for the cause.\n",
                rc == ncclSystemError ? "system error" : "invalid configuration");
    return rc;
}

ncclResult_t gwn_devices(int *ndev)
{
    pthread_mutex_lock(&G.lock);
    *ndev = G.ndev;
    pthread_mutex_unlock(&G.lock);
    return ncclSuccess;
}

ncclResult_t gwn_props(int dev, ncclNetProperties_v12_t *p)
{
    pthread_mutex_lock(&G.lock);
    if (dev < 0 || dev >= G.ndev) {
        pthread_mutex_unlock(&G.lock);
        WARN("getProperties: device %d out of range (%d devices)", dev, G.ndev);
        return ncclInvalidArgument;
    }
    gwn_dev_t *d = &G.dev[dev];
    memset(p, 0, sizeof(*p));
    p->name = d->name;
    p->pciPath = d->pci_path;
    p->guid = (uint64_t)dev;
    p->ptrSupport = d->ptr_support;
    p->regIsGlobal = 0;
    p->forceFlush = 0;
    p->speed = d->speed;
    p->port = d->port;
    p->latency = 0;
    p->maxComms = 65536;
    p->maxRecvs = GWN_MAX_RECVS;
    p->netDeviceType = NCCL_NET_DEVICE_HOST;
    p->netDeviceVersion = 0;
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = dev;
    p->maxP2pBytes = 1UL << 30;
    p->maxCollBytes = 1UL << 30;
    p->maxMultiRequestSize = 1;
    p->railId = NCCL_NET_ID_UNDEF;
    p->planeId = NCCL_NET_ID_UNDEF;
    pthread_mutex_unlock(&G.lock);
    return ncclSuccess;
}

/* ---- comms -------------------------------------------------------------------------------------- */
static gwn_comm_t *comm_new(int kind, int devi)
{
    size_t nreq = kind == GWN_LISTEN ? 0 : GWN_MAX_REQS;
    gwn_comm_t *c = calloc(1, sizeof(*c) + nreq * sizeof(gwn_req_t));
    if (!c)
        return NULL;
    c->kind = kind;
    c->devi = devi;
    c->dev = &G.dev[devi];
    for (size_t i = nreq; i-- > 0;) {
        c->reqs[i].comm = c;
        c->reqs[i].next_free = c->free_reqs;
        c->free_reqs = &c->reqs[i];
    }
    return c;
}

static void log_path(gwn_comm_t *c)
{
    gw_ep_info_t ei = {.size = sizeof(ei)};
    if (gw_ep_query(c->ep, &ei) != GW_OK)
        return;
    INFO(NCCL_INIT | NCCL_NET, "%s comm %p dev %d (%s) <-> %s: transport %s, path %s; %s%s", kind_name(c->kind),
         (void *)c, c->devi, c->dev->name, ei.peer, ei.transport, ei.path,
         ei.downgrades[0] ? "better ones not taken: " : "no better transport was passed over",
         ei.downgrades);
}

/* Under G.lock: checks DEV, opens its context, and gives a new comm of KIND
 * (listen and connect open the same way). */
static ncclResult_t comm_open(const char *what, int dev, int kind, gwn_comm_t **out)
{
    *out = NULL;
    if (dev < 0 || dev >= G.ndev) {
        WARN("%s: device %d out of range (%d devices)", what, dev, G.ndev);
        return ncclInvalidArgument;
    }
    gw_status_t st = dev_ctx(&G.dev[dev]);
    if (st != GW_OK)
        return map_status(st);
    *out = comm_new(kind, dev);
    return *out ? ncclSuccess : ncclSystemError;
}

ncclResult_t gwn_listen(int dev, void *handle, void **listen_comm)
{
    *listen_comm = NULL;
    pthread_mutex_lock(&G.lock);
    gwn_comm_t *c = NULL;
    ncclResult_t rc = comm_open("listen", dev, GWN_LISTEN, &c);
    if (rc != ncclSuccess)
        goto out;
    gwn_dev_t *d = &G.dev[dev];
    gw_status_t st;
    char ip[64], used[IFNAMSIZ], bind_addr[96];
    const char *want = gw_setting_value(d->ctx, "GPUWIRE_NCCL_IFNAME");
    const char *ifn = want && want[0] ? want : d->ifname;
    if (if_ipv4(ifn, ip, sizeof(ip), used, sizeof(used)) != 0 &&
        if_ipv4("", ip, sizeof(ip), used, sizeof(used)) != 0)
        snprintf(ip, sizeof(ip), "127.0.0.1");
    snprintf(bind_addr, sizeof(bind_addr), "%s:0", ip);
    st = gw_listen(d->ctx, bind_addr, &c->l);
    if (st != GW_OK) {
        WARN("listen on %s (dev %d %s) failed: %s: %s", bind_addr, dev, d->name, gw_status_name(st),
             gw_last_error(d->ctx));
        rc = map_status(st);
        goto out;
    }
    gw_listener_addr(c->l, c->addr, sizeof(c->addr));
    if (getrandom(&c->id, sizeof(c->id), 0) != sizeof(c->id))
        c->id = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)c;
    if (gwn_handle_encode(handle, NCCL_NET_HANDLE_MAXSIZE, (uint16_t)dev, c->id, c->addr) != 0) {
        WARN("listen: address %s does not fit a handle", c->addr);
        rc = ncclInternalError;
        goto out;
    }
    INFO(NCCL_INIT | NCCL_NET, "listen comm %p dev %d (%s) on %s", (void *)c, dev, d->name, c->addr);
    *listen_comm = c;
    c = NULL;
out:
    if (c) {
        gw_listener_destroy(c->l);
        free(c);
    }
    pthread_mutex_unlock(&G.lock);
    return rc;
}

ncclResult_t gwn_connect(int dev, void *handle, void **send_comm)
{
    *send_comm = NULL;
    gwn_handle_t h;
    char why[256];
    if (gwn_handle_decode(handle, NCCL_NET_HANDLE_MAXSIZE, &h, why, sizeof(why)) != 0) {
        WARN("connect: %s: does the peer load another net plugin (NCCL_NET_PLUGIN)?", why);
        return ncclInvalidUsage;
    }
    pthread_mutex_lock(&G.lock);
    gwn_comm_t *c = NULL;
    ncclResult_t rc = comm_open("connect", dev, GWN_SEND, &c);
    if (rc != ncclSuccess)
        goto out;
    gwn_dev_t *d = &G.dev[dev];
    gw_status_t st;
    snprintf(c->addr, sizeof(c->addr), "%s", h.addr);
    st = gw_connect(d->ctx, h.addr, &c->ep);
    if (st != GW_OK) {
        WARN("connect to %s (dev %d %s) failed: %s: %s", h.addr, dev, d->name, gw_status_name(st),
             gw_last_error(d->ctx));
        rc = map_status(st);
        goto out;
    }
    c->hello = (gwn_hello_t){.magic = GWN_HELLO_MAGIC, .dev = h.dev, .id = h.id};
    st = gw_send(c->ep, &c->hello, sizeof(c->hello), NULL, GWN_HELLO_TAG, NULL);
    if (st != GW_OK) {
        WARN("connect to %s: sending the hello failed: %s: %s", h.addr, gw_status_name(st),
             gw_last_error(d->ctx));
        rc = map_status(st);
        goto out;
    }
    log_path(c);
    *send_comm = c;
    c = NULL;
out:
    if (c) {
        gw_ep_close(c->ep, 0);
        free(c);
    }
    pthread_mutex_unlock(&G.lock);
    return rc;
}

ncclResult_t gwn_accept(void *listen_comm, void **recv_comm)
{
    gwn_comm_t *l = listen_comm;
    *recv_comm = NULL;
    pthread_mutex_lock(&G.lock);
    ncclResult_t rc = ncclSuccess;
    gw_context_t *ctx = l->dev->ctx;
    gw_status_t st;
    gw_progress(ctx);
    if (!l->pending) {
        st = gw_accept(l->l, 0, &l->pending);
        if (st == GW_INPROGRESS)
            goto out;
        if (st != GW_OK) {
            WARN("accept on %s failed: %s: %s", l->addr, gw_status_name(st), gw_last_error(ctx));
            rc = map_status(st);
            goto out;
        }
        memset(&l->hello, 0, sizeof(l->hello));
        st = gw_recv(l->pending, &l->hello, sizeof(l->hello), NULL, GWN_HELLO_TAG, GWN_TAG_MASK, &l->hello_req);
        if (st != GW_OK) {
            WARN("accept on %s: receiving the hello failed: %s: %s", l->addr, gw_status_name(st),
                 gw_last_error(ctx));
            rc = map_status(st);
            goto drop;
        }
    }
    st = gw_request_test(l->hello_req);
    if (st == GW_INPROGRESS)
        goto out;
    gw_request_info_t hi = {.size = sizeof(hi)};
    gw_request_info(l->hello_req, &hi);
    gw_request_free(l->hello_req);
    l->hello_req = NULL;
    if (st != GW_OK) {
        WARN("accept on %s: the hello did not arrive: %s: %s", l->addr, gw_status_name(st), gw_last_error(ctx));
        rc = map_status(st);
        goto drop;
    }
    char why[256];
    if (gwn_hello_check(&l->hello, hi.length, l->id, why, sizeof(why)) != 0) {
        WARN("accept on %s: %s: a connect with a stale or foreign handle", l->addr, why);
        rc = ncclInvalidUsage;
        goto drop;
    }
    gwn_comm_t *c = comm_new(GWN_RECV, l->devi);
    if (!c) {
        rc = ncclSystemError;
        goto drop;
    }
    c->ep = l->pending;
    l->pending = NULL;
    snprintf(c->addr, sizeof(c->addr), "%s", l->addr);
    log_path(c);
    *recv_comm = c;
    goto out;
drop:
    if (l->hello_req) {
        gw_request_free(l->hello_req);
        l->hello_req = NULL;
    }
    gw_ep_close(l->pending, 0);
    l->pending = NULL;
out:
    pthread_mutex_unlock(&G.lock);
    return rc;
}

/* ---- memory ------------------------------------------------------------------------------------ */
ncclResult_t gwn_reg(void *comm, void *data, size_t size, int type, void **mhandle)
{
    gwn_comm_t *c = comm;
    *mhandle = NULL;
    if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
        WARN("regMr %p+%zu: memory type %d is neither NCCL_PTR_HOST nor NCCL_PTR_CUDA", data, size, type);
        return ncclInvalidArgument;
    }
    pthread_mutex_lock(&G.lock);
    ncclResult_t rc = ncclSuccess;
    gw_context_t *ctx = c->dev->ctx;
    gw_mem_t *m = NULL;
    gw_status_t st = gw_mem_reg(ctx, data, size, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &m);
    if (st != GW_OK) {
        WARN("regMr %p+%zu (%s) on %s comm %p failed: %s: %s", data, size, type == NCCL_PTR_CUDA ? "CUDA" : "host",
             kind_name(c->kind), (void *)c, gw_status_name(st), gw_last_error(ctx));
        rc = map_status(st);
        goto out;
    }
    gw_mem_info_t mi = {.size = sizeof(mi)};
    gw_mem_query(m, &mi);
    if ((type == NCCL_PTR_CUDA) != (mi.type == GW_MEM_CUDA)) {
        WARN("regMr %p+%zu: NCCL registers it as %s memory, gpuwire finds %s memory there%s%s%s", data, size,
             type == NCCL_PTR_CUDA ? "CUDA" : "host", mi.type == GW_MEM_CUDA ? "CUDA" : "host",
             G.cuda_why[0] ? " (gpuwire has no CUDA driver: " : "", G.cuda_why, G.cuda_why[0] ? ")" : "");
        gw_mem_dereg(m);
        rc = ncclInvalidUsage;
        goto out;
    }
    one_line(mi.path);
    if (mi.type == GW_MEM_CUDA && !c->cuda_note) {
        c->cuda_note = 1;
        INFO(NCCL_INIT | NCCL_NET, "%s comm %p: GPU %d (%s) memory %p+%zu: %s", kind_name(c->kind), (void *)c,
             mi.cuda_device, mi.pci_bus_id, data, size, mi.path);
    } else {
        INFO(NCCL_NET, "%s comm %p: regMr %p+%zu %s: %s", kind_name(c->kind), (void *)c, data, size,
             mi.type == GW_MEM_CUDA ? "CUDA" : "host", mi.path);
    }
    gwn_mr_t *mr = malloc(sizeof(*mr));
    if (!mr) {
        gw_mem_dereg(m);
        rc = ncclSystemError;
        goto out;
    }
    *mr = (gwn_mr_t){.mem = m, .dev = c->dev};
    *mhandle = mr;
out:
    pthread_mutex_unlock(&G.lock);
    return rc;
}

ncclResult_t gwn_reg_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd,
                                   void **mhandle)
{
    /* Not advertised (no NCCL_PTR_DMABUF); should a NCCL call it anyway, the
     * address alone is registered, through gpuwire's own dma-buf rung. */
    INFO(NCCL_NET, "regMrDmaBuf %p+%zu: NCCL's dma-buf fd %d (offset %llu) not used; gpuwire registers the "
         "address itself", data, size, fd, (unsigned long long)offset);
    return gwn_reg(comm, data, size, type, mhandle);
}

ncclResult_t gwn_dereg(void *comm, void *mhandle)
{
    gwn_mr_t *mr = mhandle;
    if (!mr)
        return ncclSuccess;
    gw_mem_t *m = mr->mem;
    pthread_mutex_lock(&G.lock);
    gw_context_t *ctx = mr->dev->ctx;
    gw_status_t st = gw_mem_dereg(m);
    for (int i = 0; st == GW_ERR_BUSY && i < 2000; i++) { /* a local operation still on it: up to ~2 s */
        gw_progress(ctx);
        if (i > 100)
            usleep(1000);
        st = gw_mem_dereg(m);
    }
    if (st != GW_OK)
        WARN("deregMr %p on device %s failed: %s: %s", mhandle, mr->dev->name, gw_status_name(st),
             gw_last_error(ctx));
    else
        free(mr);
    pthread_mutex_unlock(&G.lock);
    return map_status(st);
}

/* ---- data ---------------------------------------------------------------------------------------- */
static gwn_req_t *req_get(gwn_comm_t *c)
{
    gwn_req_t *r = c->free_reqs;
    if (r) {
        c->free_reqs = r->next_free;
        r->used = 1;
        r->n = 0;
    }
    return r;
}

static void req_put(gwn_req_t *r)
{
    for (int i = 0; i < r->n; i++)
        gw_request_free(r->r[i]);
    r->n = 0;
    r->used = 0;
    r->next_free = r->comm->free_reqs;
    r->comm->free_reqs = r;
}

ncclResult_t gwn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request)
{
    gwn_comm_t *c = send_comm;
    *request = NULL;
    pthread_mutex_lock(&G.lock);
    ncclResult_t rc = ncclSuccess;
    gwn_req_t *r = req_get(c);
    if (!r) /* NCCL retries a NULL request later */
        goto out;
    gw_status_t st = gw_send(c->ep, data, size, mr_mem(mhandle), (uint32_t)tag, &r->r[0]);
    if (st == GW_ERR_NO_RESOURCE) {
        req_put(r);
        goto out;
    }
    if (st != GW_OK) {
        WARN("isend %p+%zu tag %d on send comm %p to %s failed: %s: %s", data, size, tag, (void *)c, c->addr,
             gw_status_name(st), gw_last_error(c->dev->ctx));
        req_put(r);
        rc = map_status(st);
        goto out;
    }
    r->n = 1;
    *request = r;
out:
    pthread_mutex_unlock(&G.lock);
    return rc;
}

ncclResult_t gwn_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                              void **request)
{
    gwn_comm_t *c = recv_comm;
    *request = NULL;
    if (n < 1 || n > GWN_MAX_RECVS) {
        WARN("irecv on recv comm %p: %d receives grouped, this plugin takes 1 to %d (maxRecvs)", (void *)c, n,
             GWN_MAX_RECVS);
        return ncclInternalError;
    }
    pthread_mutex_lock(&G.lock);
    ncclResult_t rc = ncclSuccess;
    gwn_req_t *r = req_get(c);
    if (!r)
        goto out;
    for (int i = 0; i < n; i++) {
        gw_status_t st = gw_recv(c->ep, data[i], sizes[i], mhandles ? mr_mem(mhandles[i]) : NULL, (uint32_t)tags[i],
                                 GWN_TAG_MASK, &r->r[i]);
        if (st != GW_OK) {
            /* receives already posted stay posted (gpuwire cannot withdraw
             * one); the comm is unusable after this error anyway */
            WARN("irecv %d/%d %p+%zu tag %d on recv comm %p (%s) failed: %s: %s", i + 1, n, data[i], sizes[i],
                 tags[i], (void *)c, c->addr, gw_status_name(st), gw_last_error(c->dev->ctx));
            req_put(r);
            rc = map_status(st);
            goto out;
        }
        r->n = i + 1;
    }
    *request = r;
out:
    pthread_mutex_unlock(&G.lock);
    return rc;
}

ncclResult_t gwn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
    gwn_comm_t *c = recv_comm;
    *request = NULL;
    pthread_mutex_lock(&G.lock);
    if (!c->flushed_note) {
        c->flushed_note = 1;
        INFO(NCCL_NET, "recv comm %p: iflush needs no request: gpuwire completes a receive into GPU memory "
             "only after its data is visible to the GPU", (void *)c);
    }
    pthread_mutex_unlock(&G.lock);
    return ncclSuccess;
}

ncclResult_t gwn_test(void *request, int *done, int *sizes)
{
    gwn_req_t *r = request;
    *done = 0;
    if (!r || !r->used) {
        WARN("test: request %p is not an outstanding request of this plugin", request);
        return ncclInternalError;
    }
    pthread_mutex_lock(&G.lock);
    gwn_comm_t *c = r->comm;
    ncclResult_t rc = ncclSuccess;
    gw_progress(c->dev->ctx);
    for (int i = 0; i < r->n; i++) {
        gw_status_t st = gw_request_test(r->r[i]);
        if (st == GW_INPROGRESS)
            goto out;
        if (st != GW_OK) {
            gw_request_info_t ri = {.size = sizeof(ri)};
            gw_ep_info_t ei = {.size = sizeof(ei)};
            gw_request_info(r->r[i], &ri);
            gw_ep_query(c->ep, &ei);
            if (st == GW_ERR_TRUNCATED)
                WARN("%s comm %p: a message of %zu bytes (tag %llu) arrived for a smaller receive: %s",
                     kind_name(c->kind), (void *)c, ri.length, (unsigned long long)ri.tag, gw_status_str(st));
            else
                WARN("%s comm %p with %s over %s failed: %s (%s)%s%s", kind_name(c->kind), (void *)c, ei.peer,
                     ei.transport, gw_status_name(st), gw_status_str(st), ei.error_detail[0] ? ": " : "",
                     ei.error_detail);
            req_put(r);
            *done = 1;
            rc = map_status(st);
            goto out;
        }
    }
    for (int i = 0; i < r->n; i++) {
        gw_request_info_t ri = {.size = sizeof(ri)};
        gw_request_info(r->r[i], &ri);
        if (sizes)
            sizes[i] = (int)ri.length;
    }
    req_put(r);
    *done = 1;
out:
    pthread_mutex_unlock(&G.lock);
    return rc;
}

static ncclResult_t close_comm(gwn_comm_t *c)
{
    if (!c)
        return ncclSuccess;
    pthread_mutex_lock(&G.lock);
    for (size_t i = 0; c->kind != GWN_LISTEN && i < GWN_MAX_REQS; i++)
        if (c->reqs[i].used)
            req_put(&c->reqs[i]);
    if (c->hello_req)
        gw_request_free(c->hello_req);
    if (c->pending)
        gw_ep_close(c->pending, 0);
    gw_listener_destroy(c->l);
    gw_status_t st = c->ep ? gw_ep_close(c->ep, 1000) : GW_OK;
    if (st != GW_OK)
        INFO(NCCL_NET, "%s comm %p: closing the endpoint to %s: %s", kind_name(c->kind), (void *)c, c->addr,
             gw_status_name(st));
    pthread_mutex_unlock(&G.lock);
    free(c);
    return ncclSuccess;
}

ncclResult_t gwn_close(void *comm) { return close_comm(comm); }

ncclResult_t gwn_finalize(void)
{
    pthread_mutex_lock(&G.lock);
    int last = G.refs > 0 && G.refs == 1;
    pthread_mutex_unlock(&G.lock);
    if (last)
        stop_ticker(); /* before the contexts go, and before NCCL may unload us */
    pthread_mutex_lock(&G.lock);
    if (G.refs > 0 && --G.refs == 0) {
        for (int i = 0; i < G.ndev; i++) {
            if (G.dev[i].ctx && gw_context_destroy(G.dev[i].ctx) == GW_OK)
                G.dev[i].ctx = NULL;
            else if (G.dev[i].ctx)
                INFO(NCCL_NET, "finalize: device %s keeps its context: %s", G.dev[i].name,
                     gw_last_error(G.dev[i].ctx));
        }
    }
    pthread_mutex_unlock(&G.lock);
    return ncclSuccess;
}
