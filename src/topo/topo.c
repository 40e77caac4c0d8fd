/* SPDX-License-Identifier: Apache-2.0 */
/* topo.c - discovery of GPUs, RDMA NICs and the PCIe tree between them, pair
 * classification (nvidia-smi topo -m classes) and nearest-NIC choice. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/log.h"
#include "core/settings.h"
#include "core/util.h"
#include "topo/topo.h"

#define NVIDIA_VENDOR 0x10de

const char *gw_topo_link_name(gw_topo_link_t l)
{
    switch (l) {
    case GW_LINK_SELF: return "X";
    case GW_LINK_NV: return "NV";
    case GW_LINK_PIX: return "PIX";
    case GW_LINK_PXB: return "PXB";
    case GW_LINK_PHB: return "PHB";
    case GW_LINK_NODE: return "NODE";
    case GW_LINK_SYS: return "SYS";
    case GW_LINK_UNKNOWN: break;
    }
    return "?";
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void note_add_(char *note, size_t cap, const char *fmt, ...)
{
    /* notes are bounded by their buffer; later ones are cut */
    size_t n = strlen(note);
    if (n + 4 >= cap)
        return;
    if (n) {
        memcpy(note + n, "; ", 3);
        n += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(note + n, cap - n, fmt, ap);
    va_end(ap);
}
#define note_add(buf, ...) note_add_((buf), sizeof(buf), __VA_ARGS__)

/* Sorted list of directory entries (names only). */
typedef struct names {
    char (*v)[256];
    int n;
} names_t;

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static int list_dir(const char *root, const char *rel, names_t *out, char *why, size_t whylen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    out->v = NULL;
    out->n = 0;
    DIR *d = opendir(path);
    if (!d) {
        snprintf(why, whylen, "opendir(%.300s) failed: %s", path, strerror(errno));
        return -1;
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            void *nv = realloc(out->v, (size_t)cap * sizeof(*out->v));
            if (!nv) {
                closedir(d);
                snprintf(why, whylen, "out of memory listing %.300s", path);
                return -1;
            }
            out->v = nv;
        }
        snprintf(out->v[out->n++], 256, "%s", e->d_name);
    }
    closedir(d);
    if (out->n)
        qsort(out->v, (size_t)out->n, sizeof(*out->v), cmp_name);
    return 0;
}

static void names_free(names_t *n)
{
    free(n->v);
    n->v = NULL;
    n->n = 0;
}

/* Largest-but-one memory BAR: NVIDIA GPUs expose registers at BAR0 and the
 * framebuffer aperture (BAR1) as the second memory resource. */
static uint64_t read_bar1(const char *root, const char *sysdir, gw_topo_dev_t *d)
{
    char rel[600], buf[2048], why[256];
    snprintf(rel, sizeof(rel), "%s/resource", sysdir);
    if (gw_sysfs_read(root, rel, buf, sizeof(buf), why, sizeof(why)) < 0) {
        note_add(d->note, "BAR1 unknown: %s", why);
        return 0;
    }
    int mem_seen = 0;
    char *save = NULL;
    int line = 0;
    for (char *l = strtok_r(buf, "\n", &save); l && line < 6; l = strtok_r(NULL, "\n", &save), line++) {
        unsigned long long start, end, flags;
        if (sscanf(l, "%llx %llx %llx", &start, &end, &flags) != 3) {
            note_add(d->note, "BAR1 unknown: %s line %d unparsable: \"%.40s\"", rel, line + 1, l);
            return 0;
        }
        if (!(flags & 0x200) || end <= start) /* IORESOURCE_MEM */
            continue;
        if (++mem_seen == 2)
            return end - start + 1;
    }
    note_add(d->note, "BAR1 unknown: %s lists fewer than two memory BARs", rel);
    return 0;
}

/* Fills the PCI facts of d from its sysfs directory (relative to root). */
static void fill_pci(gw_topo_t *t, gw_topo_dev_t *d)
{
    const char *root = t->root;
    char why[512], rel[700], buf[256];
    long v;

    /* chain: /devices/pci0000:00/0000:00:01.0/0000:01:00.0/.../<self> */
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s", d->sysdir);
    int nbdf = 0;
    size_t offs[GW_TOPO_MAX_CHAIN + 1];
    char bdfs[GW_TOPO_MAX_CHAIN + 1][16];
    char *save = NULL;
    size_t pos = 0;
    for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        pos = (size_t)(c - tmp) + strlen(c);
        if (!d->root_complex[0] && strncmp(c, "pci", 3) == 0 && strchr(c, ':')) {
            snprintf(d->root_complex, sizeof(d->root_complex), "%s", c);
            continue;
        }
        if (d->root_complex[0] && gw_is_bdf(c)) {
            if (nbdf > GW_TOPO_MAX_CHAIN) {
                note_add(d->note, "PCIe path deeper than %d bridges; classification unknown",
                         GW_TOPO_MAX_CHAIN);
                d->root_complex[0] = '\0';
                return;
            }
            snprintf(bdfs[nbdf], 16, "%s", c);
            offs[nbdf] = pos;
            nbdf++;
        }
    }
    if (!d->root_complex[0] || nbdf == 0) {
        note_add(d->note, "%s is not under a PCI root complex; classification unknown", d->sysdir);
        d->root_complex[0] = '\0';
        return;
    }
    if (strcmp(bdfs[nbdf - 1], d->bdf) != 0)
        snprintf(d->bdf, sizeof(d->bdf), "%s", bdfs[nbdf - 1]);
    d->nchain = nbdf - 1;
    for (int k = 0; k < d->nchain; k++) {
        gw_topo_bridge_t *b = &d->chain[k];
        snprintf(b->bdf, sizeof(b->bdf), "%s", bdfs[k]);
        snprintf(b->sysdir, sizeof(b->sysdir), "%.*s", (int)offs[k], d->sysdir);
        uint8_t cfg[256];
        snprintf(rel, sizeof(rel), "%s/config", b->sysdir);
        long n = gw_sysfs_read_bin(root, rel, cfg, sizeof(cfg), why, sizeof(why));
        b->port_type = n > 0 ? gw_pcicfg_port_type(cfg, n) : GW_PCIE_TYPE_UNKNOWN;
        b->type_from_cfg = b->port_type != GW_PCIE_TYPE_UNKNOWN;
        if (!b->type_from_cfg) {
            /* infer from position: root port, then alternating switch ports */
            if (k == 0)
                b->port_type = GW_PCIE_ROOT_PORT;
            else if (d->chain[k - 1].port_type == GW_PCIE_UPSTREAM)
                b->port_type = GW_PCIE_DOWNSTREAM;
            else
                b->port_type = GW_PCIE_UPSTREAM;
        }
        _Static_assert(sizeof(b->unit) == sizeof(b->bdf), "unit holds a bdf");
        memcpy(b->unit, b->bdf, sizeof(b->unit));
        if (b->port_type == GW_PCIE_DOWNSTREAM && k > 0 &&
            d->chain[k - 1].port_type == GW_PCIE_UPSTREAM) /* a switch counts as one bridge */
            memcpy(b->unit, d->chain[k - 1].bdf, sizeof(b->unit));
    }

    snprintf(rel, sizeof(rel), "%s/numa_node", d->sysdir);
    d->numa = -1;
    if (gw_sysfs_read_long(root, rel, &v, why, sizeof(why)) == 0)
        d->numa = v < 0 ? -1 : (int)v;
    else
        note_add(d->note, "NUMA node unknown: %s", why);
    snprintf(rel, sizeof(rel), "%s/local_cpulist", d->sysdir);
    if (gw_sysfs_read(root, rel, d->cpulist, sizeof(d->cpulist), why, sizeof(why)) < 0)
        d->cpulist[0] = '\0';
    snprintf(rel, sizeof(rel), "%s/vendor", d->sysdir);
    if (gw_sysfs_read_long(root, rel, &v, why, sizeof(why)) == 0)
        d->vendor = (uint16_t)v;
    snprintf(rel, sizeof(rel), "%s/device", d->sysdir);
    if (gw_sysfs_read_long(root, rel, &v, why, sizeof(why)) == 0)
        d->device = (uint16_t)v;
    snprintf(rel, sizeof(rel), "%s/class", d->sysdir);
    if (gw_sysfs_read_long(root, rel, &v, why, sizeof(why)) == 0)
        d->pci_class = (uint32_t)v;
    snprintf(rel, sizeof(rel), "%s/driver", d->sysdir);
    if (gw_sysfs_resolve(root, rel, buf, sizeof(buf), why, sizeof(why)) == 0) {
        const char *s = strrchr(buf, '/');
        snprintf(d->driver, sizeof(d->driver), "%.31s", s ? s + 1 : buf);
    }
    if (d->kind == GW_TOPO_GPU)
        d->bar1_size = read_bar1(root, d->sysdir, d);
}

static const char *port_state_name(int s)
{
    static const char *n[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    return s >= 0 && s <= 5 ? n[s] : "?";
}

static int gid_nonzero(const char *g)
{
    for (; *g; g++)
        if (*g != '0' && *g != ':')
            return 1;
    return 0;
}

static void read_port(gw_topo_t *t, const char *ibdev, gw_topo_port_t *p)
{
    const char *root = t->root;
    char rel[512], why[512], buf[256];
    long v;
    p->state = p->phys_state = -1;
    p->netdev_mtu = -1;
    p->n_gids = -1;
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/state", ibdev, p->num);
    if (gw_sysfs_read(root, rel, buf, sizeof(buf), why, sizeof(why)) >= 0 &&
        gw_sysfs_read_long(root, rel, &v, why, sizeof(why)) == 0 && v >= 0 && v <= 5) {
        p->state = (int)v;
        const char *s = strchr(buf, ':');
        snprintf(p->state_str, sizeof(p->state_str), "%.31s", s ? s + 1 + (s[1] == ' ') : port_state_name(p->state));
    } else {
        note_add(p->note, "state unknown: %s", why);
    }
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/phys_state", ibdev, p->num);
    if (gw_sysfs_read(root, rel, buf, sizeof(buf), why, sizeof(why)) >= 0 &&
        gw_sysfs_read_long(root, rel, &v, why, sizeof(why)) == 0) {
        p->phys_state = (int)v;
        const char *s = strchr(buf, ':');
        snprintf(p->phys_state_str, sizeof(p->phys_state_str), "%.31s", s ? s + 1 + (s[1] == ' ') : buf);
    } else {
        note_add(p->note, "phys_state unknown: %s", why);
    }
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/link_layer", ibdev, p->num);
    if (gw_sysfs_read(root, rel, p->link_layer, sizeof(p->link_layer), why, sizeof(why)) < 0)
        note_add(p->note, "link layer unknown: %s", why);
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/rate", ibdev, p->num);
    gw_sysfs_read(root, rel, p->rate, sizeof(p->rate), why, sizeof(why));

    /* GIDs: count the non-zero ones and their RoCE types */
    names_t g;
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gids", ibdev, p->num);
    if (list_dir(root, rel, &g, why, sizeof(why)) < 0) {
        note_add(p->note, "GIDs unknown: %s", why);
    } else {
        p->n_gids = 0;
        for (int i = 0; i < g.n; i++) {
            snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gids/%s", ibdev, p->num, g.v[i]);
            if (gw_sysfs_read(root, rel, buf, sizeof(buf), why, sizeof(why)) < 0 || !gid_nonzero(buf))
                continue;
            p->n_gids++;
            snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gid_attrs/types/%s", ibdev,
                     p->num, g.v[i]);
            if (gw_sysfs_read(root, rel, buf, sizeof(buf), why, sizeof(why)) >= 0) {
                if (strcasestr(buf, "v2"))
                    p->n_rocev2++;
                else if (strcasestr(buf, "roce"))
                    p->n_rocev1++;
            }
            if (!p->netdev[0]) {
                snprintf(rel, sizeof(rel), "class/infiniband/%s/ports/%d/gid_attrs/ndevs/%s", ibdev,
                         p->num, g.v[i]);
                gw_sysfs_read(root, rel, p->netdev, sizeof(p->netdev), why, sizeof(why));
            }
        }
        names_free(&g);
    }
}

static void fill_nic(gw_topo_t *t, gw_topo_dev_t *d)
{
    char rel[600], why[512], buf[512];
    snprintf(rel, sizeof(rel), "class/infiniband/%s/device", d->name);
    int have_dev = gw_sysfs_resolve(t->root, rel, d->sysdir, sizeof(d->sysdir), why, sizeof(why)) == 0;
    if (!have_dev) {
        /* software RDMA (rxe, siw): its parent netdev names the PCI device */
        char why2[256];
        snprintf(rel, sizeof(rel), "class/infiniband/%s/parent", d->name);
        if (gw_sysfs_read(t->root, rel, buf, sizeof(buf), why2, sizeof(why2)) > 0) {
            snprintf(rel, sizeof(rel), "class/net/%s/device", buf);
            have_dev = gw_sysfs_resolve(t->root, rel, d->sysdir, sizeof(d->sysdir), why2,
                                        sizeof(why2)) == 0;
            if (!have_dev)
                note_add(d->note, "parent netdev %s has no PCI device: %s", buf, why2);
        } else {
            note_add(d->note, "no PCI device: %s", why);
        }
    }
    if (have_dev) {
        const char *base = strrchr(d->sysdir, '/');
        base = base ? base + 1 : d->sysdir;
        if (gw_is_bdf(base)) {
            snprintf(d->bdf, sizeof(d->bdf), "%.15s", base);
            fill_pci(t, d);
        } else {
            note_add(d->note, "device %s is not a PCI function", d->sysdir);
        }
        names_t nd;
        snprintf(rel, sizeof(rel), "%s/net", d->sysdir);
        if (list_dir(t->root, rel, &nd, why, sizeof(why)) == 0) {
            for (int i = 0; i < nd.n && d->nnetdevs < GW_TOPO_MAX_NETDEV; i++)
                snprintf(d->netdevs[d->nnetdevs++], 32, "%s", nd.v[i]);
            names_free(&nd);
        }
    }
    names_t pn;
    snprintf(rel, sizeof(rel), "class/infiniband/%s/ports", d->name);
    if (list_dir(t->root, rel, &pn, why, sizeof(why)) < 0) {
        note_add(d->note, "ports unknown: %s", why);
        return;
    }
    for (int i = 0; i < pn.n && d->nports < GW_TOPO_MAX_PORTS; i++) {
        char *end;
        long num = strtol(pn.v[i], &end, 10);
        if (*end || num <= 0)
            continue;
        gw_topo_port_t *p = &d->ports[d->nports++];
        p->num = (int)num;
        read_port(t, d->name, p);
        if (p->netdev[0]) {
            long mtu;
            snprintf(rel, sizeof(rel), "class/net/%s/mtu", p->netdev);
            if (gw_sysfs_read_long(t->root, rel, &mtu, why, sizeof(why)) == 0)
                p->netdev_mtu = (int)mtu;
            else
                note_add(p->note, "MTU of %s unknown: %s", p->netdev, why);
        }
    }
    names_free(&pn);
}

/* EFA: Amazon's PCI vendor with an EFA device id, or the efa driver. */
static int is_efa(const gw_topo_dev_t *d)
{
    return !strcmp(d->driver, "efa") || (d->vendor == 0x1d0f && (d->device & 0xfff0) == 0xefa0);
}

/* A CXI NIC (class/cxi/<name>): its PCI function, netdevs, and one port
 * standing for its first netdev's link (CXI has no RDMA ports in sysfs). */
static void fill_cxi(gw_topo_t *t, gw_topo_dev_t *d)
{
    char rel[600], why[512], buf[64];
    snprintf(d->fabric, sizeof(d->fabric), "cxi");
    snprintf(rel, sizeof(rel), "class/cxi/%s/device", d->name);
    if (gw_sysfs_resolve(t->root, rel, d->sysdir, sizeof(d->sysdir), why, sizeof(why)) != 0) {
        note_add(d->note, "no PCI device: %s", why);
        return;
    }
    const char *base = strrchr(d->sysdir, '/');
    base = base ? base + 1 : d->sysdir;
    if (!gw_is_bdf(base)) {
        note_add(d->note, "device %s is not a PCI function", d->sysdir);
        return;
    }
    snprintf(d->bdf, sizeof(d->bdf), "%.15s", base);
    fill_pci(t, d);
    names_t nd;
    snprintf(rel, sizeof(rel), "%s/net", d->sysdir);
    if (list_dir(t->root, rel, &nd, why, sizeof(why)) == 0) {
        for (int i = 0; i < nd.n && d->nnetdevs < GW_TOPO_MAX_NETDEV; i++)
            snprintf(d->netdevs[d->nnetdevs++], 32, "%s", nd.v[i]);
        names_free(&nd);
    }
    gw_topo_port_t *p = &d->ports[d->nports++];
    p->num = 1;
    p->state = p->phys_state = -1;
    p->netdev_mtu = p->n_gids = -1;
    snprintf(p->link_layer, sizeof(p->link_layer), "Ethernet");
    if (!d->nnetdevs) {
        note_add(p->note, "link state unknown: no netdev under %s", d->sysdir);
        return;
    }
    memcpy(p->netdev, d->netdevs[0], sizeof(p->netdev)); /* (both 32 bytes, NUL-terminated) */
    snprintf(rel, sizeof(rel), "class/net/%s/operstate", p->netdev);
    if (gw_sysfs_read(t->root, rel, buf, sizeof(buf), why, sizeof(why)) > 0) {
        int up = !strcmp(buf, "up");
        p->state = up ? 4 : 1;
        snprintf(p->state_str, sizeof(p->state_str), "%s", up ? "ACTIVE" : "DOWN");
    } else {
        note_add(p->note, "link state of %s unknown: %s", p->netdev, why);
    }
    long v;
    snprintf(rel, sizeof(rel), "class/net/%s/speed", p->netdev);
    if (gw_sysfs_read_long(t->root, rel, &v, why, sizeof(why)) == 0 && v > 0)
        snprintf(p->rate, sizeof(p->rate), "%ld Gb/sec", v / 1000);
    snprintf(rel, sizeof(rel), "class/net/%s/mtu", p->netdev);
    if (gw_sysfs_read_long(t->root, rel, &v, why, sizeof(why)) == 0)
        p->netdev_mtu = (int)v;
}

/* An RDMA (verbs or EFA) device: its PCI place and which stack reaches it. */
static void fill_ib(gw_topo_t *t, gw_topo_dev_t *d)
{
    fill_nic(t, d);
    snprintf(d->fabric, sizeof(d->fabric), "%s", is_efa(d) ? "efa" : "verbs");
}

/* The NICs listed under root/cls (one device class of sysfs), each filled by
 * fill; `what` names them in notes. */
static void scan_nics(gw_topo_t *t, const char *root, const char *cls, const char *what,
                      void (*fill)(gw_topo_t *, gw_topo_dev_t *))
{
    char rel[600], why[256];
    names_t names = {0};
    snprintf(rel, sizeof(rel), "%s/%s", root, cls);
    if (access(rel, F_OK) != 0)
        return;
    if (list_dir(root, cls, &names, why, sizeof(why)) < 0) {
        note_add(t->note, "%s unknown: %s", what, why);
        return;
    }
    for (int i = 0; i < names.n; i++) {
        if (t->nnic == GW_TOPO_MAX_NIC) {
            note_add(t->note, "more than %d NICs; the rest are ignored", GW_TOPO_MAX_NIC);
            break;
        }
        gw_topo_dev_t *d = &t->dev[t->ngpu + t->nnic];
        d->kind = GW_TOPO_NIC;
        d->numa = -1;
        snprintf(d->name, sizeof(d->name), "%s", names.v[i]);
        fill(t, d);
        t->nnic++;
    }
    names_free(&names);
}

/* ---- classification ---------------------------------------------------- */

static gw_topo_link_t classify(const gw_topo_t *t, int i, int j)
{
    const gw_topo_dev_t *a = &t->dev[i], *b = &t->dev[j];
    if (i == j)
        return GW_LINK_SELF;
    if (t->nvlinks[i][j] != 0)
        return GW_LINK_NV;
    if (!a->root_complex[0] || !b->root_complex[0])
        return GW_LINK_UNKNOWN;
    if (strcmp(a->root_complex, b->root_complex) != 0) {
        if (a->numa >= 0 && b->numa >= 0)
            return a->numa == b->numa ? GW_LINK_NODE : GW_LINK_SYS;
        /* without NUMA information: one node means NODE, else unknown */
        return t->nnodes == 1 || (t->nnodes <= 0 && a->numa < 0 && b->numa < 0) ? GW_LINK_NODE
                                                                               : GW_LINK_UNKNOWN;
    }
    const gw_topo_bridge_t *path[2 * GW_TOPO_MAX_CHAIN];
    int n = gw_topo_path_bridges(t, i, j, path, (int)GW_ARRAY_SIZE(path));
    if (n == 0)
        return GW_LINK_PHB;
    /* distinct units (a switch's ports are one unit) on the path */
    int units = 0;
    const char *seen[2 * GW_TOPO_MAX_CHAIN];
    for (int k = 0; k < n; k++) {
        int dup = 0;
        for (int u = 0; u < units; u++)
            if (!strcmp(seen[u], path[k]->unit))
                dup = 1;
        if (!dup)
            seen[units++] = path[k]->unit;
    }
    return units <= 1 ? GW_LINK_PIX : GW_LINK_PXB;
}

int gw_topo_path_bridges(const gw_topo_t *t, int i, int j, const gw_topo_bridge_t **out, int max)
{
    const gw_topo_dev_t *a = &t->dev[i], *b = &t->dev[j];
    if (!a->root_complex[0] || strcmp(a->root_complex, b->root_complex) != 0)
        return 0;
    int c = 0;
    while (c < a->nchain && c < b->nchain && !strcmp(a->chain[c].bdf, b->chain[c].bdf))
        c++;
    if (c == 0)
        return 0;
    int n = 0;
    for (int k = c - 1; k < a->nchain && n < max; k++)
        out[n++] = &a->chain[k];
    for (int k = c; k < b->nchain && n < max; k++)
        out[n++] = &b->chain[k];
    return n;
}

/* "07:00.0" matches "0000:07:00.0"; case-insensitive. */
static int bdf_match(const char *full, const char *q)
{
    size_t lf = strlen(full), lq = strlen(q);
    if (lq == 0 || lq > lf)
        return 0;
    if (strcasecmp(full + lf - lq, q) != 0)
        return 0;
    return lq == lf || full[lf - lq - 1] == ':';
}

int gw_topo_find(const gw_topo_t *t, const char *q)
{
    int n = t->ngpu + t->nnic;
    for (int i = 0; i < n; i++)
        if (!strcmp(t->dev[i].name, q))
            return i;
    for (int i = 0; i < n; i++)
        if (t->dev[i].bdf[0] && bdf_match(t->dev[i].bdf, q))
            return i;
    return -1;
}

static void read_nvlink_file(gw_topo_t *t, const char *file, int set[GW_TOPO_MAX_DEV][GW_TOPO_MAX_DEV])
{
    FILE *f = fopen(file, "re");
    if (!f) {
        note_add(t->note, "NVLink file %s unreadable: %s", file, strerror(errno));
        return;
    }
    char line[256];
    int ln = 0;
    while (fgets(line, sizeof(line), f)) {
        ln++;
        char a[64], b[64];
        int links;
        char *h = strchr(line, '#');
        if (h)
            *h = '\0';
        if (sscanf(line, "%63s %63s %d", a, b, &links) != 3) {
            char tmp[8];
            if (sscanf(line, "%7s", tmp) == 1)
                note_add(t->note, "%s:%d: expected \"BDF BDF LINKS\"", file, ln);
            continue;
        }
        int i = gw_topo_find(t, a), j = gw_topo_find(t, b);
        if (i < 0 || j < 0 || i >= t->ngpu || j >= t->ngpu || i == j || links < 0) {
            note_add(t->note, "%s:%d: %s-%s is not a pair of GPUs here", file, ln, a, b);
            continue;
        }
        t->nvlinks[i][j] = t->nvlinks[j][i] = links;
        set[i][j] = set[j][i] = 1;
    }
    fclose(f);
}

static void compute(gw_topo_t *t, const gw_topo_opts_t *o)
{
    int n = t->ngpu + t->nnic;
    static const gw_topo_opts_t none = {sizeof(gw_topo_opts_t), NULL, NULL, NULL};
    if (!o)
        o = &none;
    int (*set)[GW_TOPO_MAX_DEV] = calloc(GW_TOPO_MAX_DEV, sizeof(*set));
    char auto_file[600];
    const char *nvf = o->nvlink_file;
    if (!nvf) {
        snprintf(auto_file, sizeof(auto_file), "%s/gpuwire-nvlink.txt", t->root);
        nvf = access(auto_file, F_OK) == 0 ? auto_file : "";
    }
    if (set && nvf[0])
        read_nvlink_file(t, nvf, set);
    if (o->nvlink) {
        for (int i = 0; i < t->ngpu; i++)
            for (int j = i + 1; j < t->ngpu; j++) {
                if (set && set[i][j])
                    continue;
                int l = o->nvlink(o->nvlink_arg, &t->dev[i], &t->dev[j]);
                /* -1: NVLink present, count unknown; 0: none */
                t->nvlinks[i][j] = t->nvlinks[j][i] = l;
            }
    }
    free(set);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            t->link[i][j] = classify(t, i, j);

    int any_active = 0;
    for (int k = 0; k < t->nnic; k++)
        for (int p = 0; p < gw_topo_nic(t, k)->nports; p++)
            any_active |= gw_topo_nic(t, k)->ports[p].state == 4;
    for (int g = 0; g < t->ngpu; g++) {
        gw_topo_link_t best = GW_LINK_UNKNOWN;
        for (int pass = 0; pass < 2; pass++) {
            for (int k = 0; k < t->nnic; k++) {
                const gw_topo_dev_t *nic = gw_topo_nic(t, k);
                int active = 0;
                for (int p = 0; p < nic->nports; p++)
                    active |= nic->ports[p].state == 4;
                if (any_active && !active)
                    continue;
                gw_topo_link_t l = t->link[g][t->ngpu + k];
                if (l == GW_LINK_UNKNOWN)
                    continue;
                if (pass == 0 && l < best)
                    best = l;
                if (pass == 1 && l == best && t->nnearest[g] < GW_TOPO_MAX_NIC)
                    t->nearest[g][t->nnearest[g]++] = t->ngpu + k;
            }
            if (best == GW_LINK_UNKNOWN)
                break;
        }
    }
}

gw_status_t gw_topo_create(const char *root, const gw_topo_opts_t *opts, gw_topo_t **out,
                           char *err, size_t errlen)
{
    char why[512], rel[600];
    if (!out) {
        snprintf(err, errlen, "gw_topo_create(out=NULL) failed: nowhere to store the topology");
        return GW_ERR_INVALID;
    }
    *out = NULL;
    if (!root)
        root = gw_settings_sysfs_root(NULL);
    names_t pci = {0}, nodes = {0};
    if (opts && opts->size < sizeof(gw_topo_opts_t)) {
        snprintf(err, errlen, "gw_topo_create(root=%s) failed: opts.size %zu < %zu", root,
                 opts->size, sizeof(gw_topo_opts_t));
        return GW_ERR_INVALID;
    }
    DIR *probe = opendir(root);
    if (!probe) {
        snprintf(err, errlen, "gw_topo_create(root=%s) failed: %s (set %s to a sysfs tree)", root,
                 strerror(errno), gw_settings_name(GW_SET_SYSFS_ROOT));
        return GW_ERR_NOT_FOUND;
    }
    closedir(probe);
    gw_topo_t *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, errlen, "gw_topo_create(root=%s) failed: out of memory (%zu bytes)", root,
                 sizeof(*t));
        return GW_ERR_NOMEM;
    }
    snprintf(t->root, sizeof(t->root), "%s", root);

    t->nnodes = -1;
    if (list_dir(root, "devices/system/node", &nodes, why, sizeof(why)) == 0) {
        t->nnodes = 0;
        for (int i = 0; i < nodes.n; i++)
            if (!strncmp(nodes.v[i], "node", 4) && isdigit((unsigned char)nodes.v[i][4]))
                t->nnodes++;
        names_free(&nodes);
    }

    /* GPUs: NVIDIA display/3D controllers, in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID) */
    if (list_dir(root, "bus/pci/devices", &pci, why, sizeof(why)) < 0) {
        note_add(t->note, "no PCI devices: %s", why);
    } else {
        for (int i = 0; i < pci.n; i++) {
            long vendor, cls;
            char w2[256];
            if (!gw_is_bdf(pci.v[i]))
                continue;
            snprintf(rel, sizeof(rel), "bus/pci/devices/%s/vendor", pci.v[i]);
            if (gw_sysfs_read_long(root, rel, &vendor, w2, sizeof(w2)) < 0 || vendor != NVIDIA_VENDOR)
                continue;
            snprintf(rel, sizeof(rel), "bus/pci/devices/%s/class", pci.v[i]);
            if (gw_sysfs_read_long(root, rel, &cls, w2, sizeof(w2)) < 0) {
                note_add(t->note, "NVIDIA device %s skipped: %s", pci.v[i], w2);
                continue;
            }
            if ((cls >> 8) != 0x0300 && (cls >> 8) != 0x0302)
                continue;
            if (t->ngpu == GW_TOPO_MAX_GPU) {
                note_add(t->note, "more than %d GPUs; the rest are ignored", GW_TOPO_MAX_GPU);
                break;
            }
            gw_topo_dev_t *d = &t->dev[t->ngpu];
            d->kind = GW_TOPO_GPU;
            snprintf(d->name, sizeof(d->name), "GPU%d", t->ngpu);
            snprintf(d->bdf, sizeof(d->bdf), "%s", pci.v[i]);
            snprintf(rel, sizeof(rel), "bus/pci/devices/%s", pci.v[i]);
            if (gw_sysfs_resolve(root, rel, d->sysdir, sizeof(d->sysdir), w2, sizeof(w2)) < 0) {
                note_add(d->note, "PCI path unknown: %s", w2);
                d->numa = -1;
            } else {
                fill_pci(t, d);
            }
            t->ngpu++;
        }
        names_free(&pci);
    }

    scan_nics(t, root, "class/infiniband", "RDMA devices", fill_ib);
    scan_nics(t, root, "class/cxi", "CXI devices", fill_cxi); /* Slingshot (libfabric's cxi provider) */
    compute(t, opts);
    *out = t;
    return GW_OK;
}

void gw_topo_destroy(gw_topo_t *t) { free(t); }

gw_status_t gw_topo_default_nic(const char *root, const char *gpu_bdf, char *out, size_t outlen,
                                char *why, size_t whylen)
{
    gw_topo_t *t = NULL;
    gw_status_t st = gw_topo_create(root, NULL, &t, why, whylen);
    if (st != GW_OK)
        return st;
    int g = gw_topo_find(t, gpu_bdf);
    if (g < 0 || g >= t->ngpu) {
        snprintf(why, whylen, "no GPU with PCI address %s under %s", gpu_bdf, t->root);
        st = GW_ERR_NOT_FOUND;
    } else if (t->nnearest[g] == 0) {
        snprintf(why, whylen, "no RDMA device with a known PCIe path to GPU %s under %s", gpu_bdf,
                 t->root);
        st = GW_ERR_NOT_FOUND;
    } else {
        int k = t->nearest[g][0];
        snprintf(out, outlen, "%s", t->dev[k].name);
        snprintf(why, whylen, "%s is %s to GPU %s", t->dev[k].name,
                 gw_topo_link_name(t->link[g][k]), gpu_bdf);
    }
    gw_topo_destroy(t);
    return st;
}
