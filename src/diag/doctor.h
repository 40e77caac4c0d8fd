/* SPDX-License-Identifier: Apache-2.0 */
/* doctor.h - the checks behind `gpuwire doctor` (diag layer: a static
 * library linked into the tool only, not into libgpuwire.so; above the
 * transports, whose loaders its hooks use).
 *
 * Each check tests one requirement of GPUDirect RDMA and ends with a verdict,
 * the evidence it saw and a one-line fix.  Checks read sysfs/procfs (roots
 * configurable, so recorded trees can be checked) and, for what only a
 * driver can say, call hooks in gw_doctor_env_t: the CUDA driver, libibverbs,
 * libfabric (for EFA and CXI NICs, which gpuwire reaches through the ofi
 * transport) and a live registration test.  A NULL hook means "this build cannot ask":
 * the checks that need it report SKIP with the reason.  No check reports
 * PASS for something it did not verify: what it could not read is UNKNOWN,
 * with the reason.
 *
 * Exit status (gw_doctor_exit_code): 0 all pass or skip, 1 warnings or
 * unknowns, 2 failures.
 */
#ifndef GW_DIAG_DOCTOR_H
#define GW_DIAG_DOCTOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/settings.h"
#include "topo/topo.h"

typedef enum gw_verdict {
    GW_VERDICT_PASS = 0,
    GW_VERDICT_WARN,
    GW_VERDICT_FAIL,
    GW_VERDICT_SKIP,
    GW_VERDICT_UNKNOWN
} gw_verdict_t;

const char *gw_verdict_name(gw_verdict_t v); /* "pass", "warn", ... */

typedef struct gw_check {
    char name[32];       /* stable id, e.g. "pcie.acs" */
    char object[64];     /* what it looked at, e.g. "GPU0 0000:07:00.0 - mlx5_0"; "" host-wide */
    gw_verdict_t verdict;
    char evidence[768];
    char fix[256];       /* "" when nothing is to be done */
} gw_check_t;

typedef struct gw_doctor_report {
    gw_check_t *checks;
    int n, cap;
} gw_doctor_report_t;

/* What the CUDA driver says about one GPU (hook output). */
typedef struct gw_doctor_gpu {
    char pci_bus_id[16];  /* "0000:07:00.0" */
    char name[64];
    int gdr_supported;    /* CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: 1, 0, -1 unknown */
    int dmabuf_supported; /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: 1, 0, -1 unknown */
} gw_doctor_gpu_t;

typedef struct gw_doctor_cuda {
    int driver_version;   /* cuDriverGetVersion, e.g. 12040 */
    int ngpu;
    gw_doctor_gpu_t gpu[GW_TOPO_MAX_GPU];
} gw_doctor_cuda_t;

/* What libibverbs says (hook output). */
typedef struct gw_doctor_verbs {
    char library[256];    /* which library was loaded */
    int has_reg_dmabuf_mr;/* ibv_reg_dmabuf_mr present (rdma-core >= 34): 1, 0 */
    int nports;
    struct {
        char dev[32];
        int port;
        int active_mtu;   /* bytes (256..4096), 0 unknown */
    } port[64];
} gw_doctor_verbs_t;

typedef struct gw_doctor_env {
    size_t size;                /* sizeof(gw_doctor_env_t) */
    const char *sysfs_root;     /* NULL: GPUWIRE_SYSFS_ROOT, else /sys */
    const char *proc_root;      /* NULL: /proc */
    const char *boot_dir;       /* NULL: /boot (kernel config-<release>) */
    uint64_t register_bytes;    /* GPU memory one process will register (BAR1 check); 0: 1 GiB */
    gw_topo_opts_t topo_opts;   /* NVLink hook/file for the topology (size 0: none) */
    void *arg;                  /* passed to every hook */
    /* CUDA driver: fill *out and return 0, or return -1 with why (absent or
     * broken driver).  NULL: built without the CUDA loader. */
    int (*cuda_query)(void *arg, gw_doctor_cuda_t *out, char *why, size_t whylen);
    /* libibverbs: as above.  NULL: built without the verbs loader. */
    int (*verbs_query)(void *arg, gw_doctor_verbs_t *out, char *why, size_t whylen);
    /* Live test: register a buffer on the GPU on NIC nic:port and move data
     * through it; return the verdict and fill evidence/fix.  NULL: cannot. */
    gw_verdict_t (*live_test)(void *arg, const gw_topo_dev_t *gpu, const gw_topo_dev_t *nic,
                              int port, char *evidence, size_t evlen, char *fix, size_t fixlen);
    /* Locked-memory limit: return 0 and *bytes (UINT64_MAX = unlimited).
     * NULL: getrlimit(RLIMIT_MEMLOCK) of this process. */
    int (*memlock)(void *arg, uint64_t *bytes, char *why, size_t whylen);
    /* Why the hooks above are NULL, e.g. "built without the verbs transport"
     * (shown as the evidence of the skipped checks). */
    const char *cuda_absent_why;
    const char *verbs_absent_why;
    const char *live_absent_why;
    /* libfabric, for a NIC the verbs transport cannot drive (topology fabric
     * "efa" or "cxi"): asks for provider prov's RDM endpoints with messages
     * and RMA, as the ofi transport does.  Returns 1 when a domain of NIC nic
     * answers (its name into domain, *hmem 1 when it also answers with
     * FI_HMEM), 0 when none does (why says what did), -1 when libfabric is
     * absent or broken (why).  NULL: built without the ofi transport. */
    int (*ofi_query)(void *arg, const char *prov, const char *nic, char *domain, size_t domlen, int *hmem,
                     char *why, size_t whylen);
    const char *ofi_absent_why;
} gw_doctor_env_t;

/* Fills e with this build's real hooks (CUDA driver, libibverbs) and NVLink
 * hook, or NULL hooks with the reason; roots NULL (GPUWIRE_SYSFS_ROOT, /proc,
 * /boot).  The live test is the caller's (the tool wires one). */
void gw_doctor_env_default(gw_doctor_env_t *e);

/* Runs every check into rep (which the caller zero-initialises and frees
 * with gw_doctor_report_free).  Returns GW_ERR_NOMEM only; everything a check
 * meets is a verdict. */
gw_status_t gw_doctor_run(const gw_doctor_env_t *env, gw_doctor_report_t *rep);
void gw_doctor_report_free(gw_doctor_report_t *rep);

/* 0, 1 or 2 as described above. */
int gw_doctor_exit_code(const gw_doctor_report_t *rep);

/* First check with this name (and object prefix, when given), or NULL. */
const gw_check_t *gw_doctor_find(const gw_doctor_report_t *rep, const char *name,
                                 const char *object_prefix);

void gw_doctor_print(const gw_doctor_report_t *rep, FILE *f, int verbose);
void gw_doctor_print_json(const gw_doctor_report_t *rep, FILE *f);

#endif
