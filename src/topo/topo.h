/* SPDX-License-Identifier: Apache-2.0 */
/* topo.h - PCIe/NUMA topology of GPUs and RDMA NICs, read from sysfs (topo layer).
 *
 * gw_topo_create() walks a sysfs tree (GPUWIRE_SYSFS_ROOT, default /sys, or
 * any recorded tree), finds the NVIDIA GPUs and the NICs that move GPU memory
 * - the RDMA devices (class/infiniband; AWS EFA among them) and HPE Slingshot
 * CXI NICs (class/cxi), each marked with what reaches it (fabric) - with
 * their netdevs and ports, the PCIe bridges between them and their NUMA nodes, and
 * classifies every pair the way `nvidia-smi topo -m` does:
 *
 *   NV#   NVLink (# links), as reported by the nvlink hook (CUDA or a file)
 *   PIX   at most one PCIe bridge or switch between the two
 *   PXB   several bridges/switches, without crossing the host bridge
 *   PHB   crosses the host bridge of one root complex (through the CPU)
 *   NODE  different root complexes of one NUMA node
 *   SYS   crosses the interconnect between NUMA nodes
 *
 * A switch (its upstream port and downstream ports) counts as one bridge, as
 * nvidia-smi does.  Every GPU gets its nearest NIC(s): the NICs with the best
 * class, among those with an ACTIVE port when any has one.
 *
 * Nothing here needs privileges, CUDA or libibverbs.  A missing or odd sysfs
 * entry never aborts the walk: the affected field stays unknown (-1, "",
 * GW_LINK_UNKNOWN) and the device's note says why.
 */
#ifndef GW_TOPO_TOPO_H
#define GW_TOPO_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>

#include "gpuwire.h"

#define GW_TOPO_MAX_GPU 32
#define GW_TOPO_MAX_NIC 32
#define GW_TOPO_MAX_DEV (GW_TOPO_MAX_GPU + GW_TOPO_MAX_NIC)
#define GW_TOPO_MAX_CHAIN 16
#define GW_TOPO_MAX_PORTS 8
#define GW_TOPO_MAX_NETDEV 4

/* Ordered from closest to farthest; UNKNOWN sorts last. */
typedef enum gw_topo_link {
    GW_LINK_SELF = 0, /* "X" */
    GW_LINK_NV,
    GW_LINK_PIX,
    GW_LINK_PXB,
    GW_LINK_PHB,
    GW_LINK_NODE,
    GW_LINK_SYS,
    GW_LINK_UNKNOWN
} gw_topo_link_t;

const char *gw_topo_link_name(gw_topo_link_t l);

/* PCIe device/port type (PCIe capability register bits 7:4). */
enum {
    GW_PCIE_ENDPOINT = 0,
    GW_PCIE_ROOT_PORT = 4,
    GW_PCIE_UPSTREAM = 5,
    GW_PCIE_DOWNSTREAM = 6,
    GW_PCIE_PCI_BRIDGE = 7,
    GW_PCIE_TYPE_UNKNOWN = -1
};

typedef enum gw_topo_kind { GW_TOPO_GPU = 0, GW_TOPO_NIC = 1 } gw_topo_kind_t;

typedef struct gw_topo_bridge {
    char bdf[16];
    char sysdir[512];   /* relative to the sysfs root: "/devices/pci0000:00/..." */
    int port_type;      /* GW_PCIE_*; from config space, else inferred from position */
    int type_from_cfg;  /* 1 when read from config space */
    char unit[16];      /* the switch or bridge it belongs to: its upstream port's
                           address for a switch's downstream ports, else its own */
} gw_topo_bridge_t;

typedef struct gw_topo_port {
    int num;
    int state;            /* 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER; -1 unknown */
    char state_str[32];   /* "ACTIVE" */
    int phys_state;       /* 5 LinkUp; -1 unknown */
    char phys_state_str[32];
    char link_layer[16];  /* "InfiniBand", "Ethernet", "" unknown */
    char rate[48];
    char netdev[32];      /* netdev of GID 0 (RoCE), "" if none */
    int netdev_mtu;       /* -1 unknown */
    int n_gids;           /* non-zero GIDs; -1 unknown */
    int n_rocev2, n_rocev1;
    char note[256];
} gw_topo_port_t;

typedef struct gw_topo_dev {
    gw_topo_kind_t kind;
    char name[32];        /* "GPU0" (ordinal in PCI bus order), "mlx5_0" */
    char bdf[16];         /* PCI address; "" when the device has none (e.g. rxe) */
    char sysdir[512];     /* relative to the sysfs root */
    char root_complex[32];/* "pci0000:00"; "" unknown */
    int numa;             /* -1 unknown or none */
    char cpulist[64];     /* local_cpulist, "" unknown */
    uint16_t vendor, device;
    uint32_t pci_class;
    char driver[32];
    gw_topo_bridge_t chain[GW_TOPO_MAX_CHAIN]; /* bridges from the root complex down */
    int nchain;
    /* GPU */
    uint64_t bar1_size;   /* 0 unknown */
    /* NIC */
    char fabric[8];       /* what reaches it: "verbs" (the verbs transport), "efa" or "cxi" (libfabric's
                           * provider of that name, through the ofi transport: an EFA device is an RDMA
                           * device without reliable connected queue pairs, a CXI NIC no RDMA device) */
    char netdevs[GW_TOPO_MAX_NETDEV][32];
    int nnetdevs;
    gw_topo_port_t ports[GW_TOPO_MAX_PORTS];
    int nports;
    char note[512];       /* what could not be read, "" if all went well */
} gw_topo_dev_t;

/* NVLink hook: links between GPUs a and b (>0), 0 for none, -1 unknown. */
typedef int (*gw_topo_nvlink_fn)(void *arg, const gw_topo_dev_t *a, const gw_topo_dev_t *b);

typedef struct gw_topo_opts {
    size_t size;              /* sizeof(gw_topo_opts_t) */
    gw_topo_nvlink_fn nvlink; /* NULL: no NVLink hook */
    void *nvlink_arg;
    /* File of "BDF BDF LINKS" lines (recorded runs, fixtures).  It wins over
     * the hook for the pairs it names.  NULL: <root>/gpuwire-nvlink.txt when
     * that exists (recorded trees carry it; a live /sys never does); "": none. */
    const char *nvlink_file;
} gw_topo_opts_t;

/* Options with this build's NVLink hook (the CUDA driver, when loadable;
 * topo_cuda.c). */
void gw_topo_opts_default(gw_topo_opts_t *o);

typedef struct gw_topo {
    char root[512];           /* sysfs root as given */
    int ngpu, nnic;
    gw_topo_dev_t dev[GW_TOPO_MAX_DEV]; /* GPUs [0, ngpu), NICs [ngpu, ngpu+nnic) */
    gw_topo_link_t link[GW_TOPO_MAX_DEV][GW_TOPO_MAX_DEV];
    int nvlinks[GW_TOPO_MAX_DEV][GW_TOPO_MAX_DEV]; /* links when GW_LINK_NV, else 0; -1 count unknown */
    /* nearest[g] lists NIC indices (into dev[]) nearest GPU g */
    int nearest[GW_TOPO_MAX_GPU][GW_TOPO_MAX_NIC];
    int nnearest[GW_TOPO_MAX_GPU];
    int nnodes;               /* NUMA nodes under devices/system/node; -1 unknown */
    char note[1024];          /* topology-wide problems ("" if none) */
} gw_topo_t;

/* Reads the topology under root (NULL: gw_settings_sysfs_root(NULL), the
 * process's GPUWIRE_SYSFS_ROOT, else /sys).
 * Errors: GW_ERR_INVALID (NULL out), GW_ERR_NOMEM, GW_ERR_NOT_FOUND (root is
 * not a directory).  A tree with no GPU and no NIC is not an error. */
gw_status_t gw_topo_create(const char *root, const gw_topo_opts_t *opts, gw_topo_t **out,
                           char *err, size_t errlen);
void gw_topo_destroy(gw_topo_t *t);

static inline gw_topo_dev_t *gw_topo_gpu(gw_topo_t *t, int g) { return &t->dev[g]; }
static inline gw_topo_dev_t *gw_topo_nic(gw_topo_t *t, int n) { return &t->dev[t->ngpu + n]; }
/* The verbs transport drives this NIC (else libfabric's provider of its
 * fabric does, through the ofi transport: EFA, CXI). */
static inline int gw_topo_nic_verbs(const gw_topo_dev_t *d) { return !strcmp(d->fabric, "verbs"); }

/* Index into dev[] of a device by name ("GPU3", "mlx5_0") or PCI address
 * ("0000:07:00.0", case-insensitive, domain optional); -1 if none. */
int gw_topo_find(const gw_topo_t *t, const char *name_or_bdf);

/* The bridges on the PCIe path between devices i and j (into out, up to max),
 * including the common ancestor; returns how many.  Empty for different root
 * complexes (the path leaves PCIe). */
int gw_topo_path_bridges(const gw_topo_t *t, int i, int j, const gw_topo_bridge_t **out, int max);

/* The default RDMA device for memory on the GPU with PCI address gpu_bdf:
 * the first of its nearest NICs (name into out).  GW_ERR_NOT_FOUND (with
 * why) when no GPU or NIC matches. */
gw_status_t gw_topo_default_nic(const char *root, const char *gpu_bdf, char *out, size_t outlen,
                                char *why, size_t whylen);

struct gw_settings;
/* The verbs transport's default device (topo_cuda.c): the NIC nearest to the GPU
 * this process works on (the device of its current CUDA context, else
 * device 0), under s's sysfs root.  Only when the process already loaded
 * the CUDA driver (s's GPUWIRE_CUDA_LIB; a GPU application): it does not
 * initialise CUDA for this.  GW_OK with the name in nic and "nearest to GPU
 * <n> at <bdf>" in why; otherwise GW_ERR_NOT_FOUND with the reason in why. */
gw_status_t gw_topo_process_nic(const struct gw_settings *s, char *nic, size_t niclen, char *why,
                                size_t whylen);

/* Writes the matrix as `nvidia-smi topo -m` does, NICs included, then a legend
 * and each GPU's nearest NIC(s). */
void gw_topo_print(const gw_topo_t *t, FILE *f);
/* One JSON object: devices, matrix, nearest. */
void gw_topo_print_json(const gw_topo_t *t, FILE *f);

/* JSON string (quoted, escaped) to f. */
void gw_json_str(FILE *f, const char *s);

/* ---- sysfs helpers shared by topo.c and doctor.c (sysfs.c) ---- */
/* Reads a small text file root/rel (rel may be absolute-looking: "/devices/...").
 * Strips trailing whitespace.  Returns length, or -1 with why set. */
int gw_sysfs_read(const char *root, const char *rel, char *buf, size_t len, char *why,
                  size_t whylen);
/* Reads a file of hex/decimal number ("0x10de", "4: ACTIVE" -> 4). -1 with why on error. */
int gw_sysfs_read_long(const char *root, const char *rel, long *out, char *why, size_t whylen);
/* Resolves root/rel (following links) to a path relative to root, "/devices/...". */
int gw_sysfs_resolve(const char *root, const char *rel, char *out, size_t outlen, char *why,
                     size_t whylen);
/* Reads up to len bytes of a binary file; returns bytes read or -1 with why. */
long gw_sysfs_read_bin(const char *root, const char *rel, uint8_t *buf, size_t len, char *why,
                       size_t whylen);
/* True for "DDDD:BB:DD.F". */
int gw_is_bdf(const char *s);

/* ---- PCI config space (pcicfg.c) ---- */
/* Device/port type from the PCIe capability; GW_PCIE_TYPE_UNKNOWN when the
 * config space is too short (non-root reads see 64 bytes) or has no PCIe cap. */
int gw_pcicfg_port_type(const uint8_t *cfg, long len);
/* Finds the ACS extended capability.  Returns 1 and fills ctrl/caps when
 * present, 0 when absent, -1 when the extended space is not readable
 * (len < 4096 or all-ones) with why set. */
int gw_pcicfg_acs(const uint8_t *cfg, long len, uint16_t *caps, uint16_t *ctrl, int *offset,
                  char *why, size_t whylen);
/* ACS control bits that redirect peer-to-peer traffic upstream. */
#define GW_ACS_SV 0x0001
#define GW_ACS_TB 0x0002
#define GW_ACS_RR 0x0004
#define GW_ACS_CR 0x0008
#define GW_ACS_UF 0x0010
#define GW_ACS_EC 0x0020
#define GW_ACS_DT 0x0040
#define GW_ACS_P2P_BLOCKING (GW_ACS_RR | GW_ACS_CR | GW_ACS_EC)

#endif
