/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_dev.c - device, port and GID choice from sysfs; the address blob.
 *
 * Everything here reads files under the sysfs root it is given (the
 * caller's gw_settings_sysfs_root(): GPUWIRE_SYSFS_ROOT, default /sys), so it
 * runs the same on a recorded or fake tree (tests/verbs/test_verbs_select.c)
 * as on a live machine, and needs no RDMA device. */
#include "transport/verbs/verbs.h"

#include "topo/topo.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads a small sysfs file, root/<fmt...>, into buf without trailing
 * whitespace (topo's gw_sysfs_read); -1 if absent. */
static int read_attr(const char *root, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int read_attr(const char *root, char *buf, size_t len, const char *fmt, ...)
{
    char rel[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    return gw_sysfs_read(root, rel, buf, len, NULL, 0);
}

static int parse_gid(const char *s, uint8_t raw[16])
{
    /* sysfs writes 8 groups of 4 hex digits separated by ':' */
    unsigned g[8];
    if (sscanf(s, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x", &g[0], &g[1], &g[2], &g[3], &g[4], &g[5],
               &g[6], &g[7]) != 8)
        return -1;
    for (int i = 0; i < 8; i++) {
        raw[2 * i] = (uint8_t)(g[i] >> 8);
        raw[2 * i + 1] = (uint8_t)g[i];
    }
    return 0;
}

static int gid_is_zero(const uint8_t raw[16])
{
    for (int i = 0; i < 16; i++)
        if (raw[i])
            return 0;
    return 1;
}

static int gid_is_v4(const uint8_t raw[16])
{
    static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(raw, pfx, 12) == 0;
}

void gw_verbs_gid_str(const uint8_t raw[16], char *buf, size_t len)
{
    char tmp[INET6_ADDRSTRLEN];
    if (gid_is_v4(raw)) {
        snprintf(buf, len, "::ffff:%u.%u.%u.%u", raw[12], raw[13], raw[14], raw[15]);
        return;
    }
    if (inet_ntop(AF_INET6, raw, tmp, sizeof(tmp)))
        snprintf(buf, len, "%s", tmp);
    else
        snprintf(buf, len, "?");
}

/* Preference of a RoCE GID: lower is better. */
static int gid_rank(const gw_verbs_gid_t *g)
{
    if (g->type == GW_GID_IB)
        return 0;
    int base = g->type == GW_GID_ROCE_V2 ? 0 : 10;
    if (g->v4)
        return base + 1;
    if (!g->link_local)
        return base + 2;
    return base + 3;
}

int gw_verbs_port_read(const char *root, const char *dev, int port, gw_verbs_port_t *out)
{
    char v[128];
    memset(out, 0, sizeof(*out));
    snprintf(out->dev, sizeof(out->dev), "%s", dev);
    out->port = port;
    out->numa_node = -1;
    const char *P = root;
    if (read_attr(P, v, sizeof(v), "class/infiniband/%s/ports/%d/state", dev, port) < 0)
        return -1;
    out->active = strstr(v, "ACTIVE") != NULL;
    if (read_attr(P, v, sizeof(v), "class/infiniband/%s/ports/%d/link_layer", dev, port) >= 0)
        out->link_layer = strcmp(v, "Ethernet") == 0 ? GW_VERBS_LL_ETH : GW_VERBS_LL_IB;
    else
        out->link_layer = GW_VERBS_LL_IB;
    if (read_attr(P, v, sizeof(v), "class/infiniband/%s/ports/%d/lid", dev, port) >= 0)
        out->lid = (uint16_t)strtoul(v, NULL, 0);
    if (read_attr(P, v, sizeof(v), "class/infiniband/%s/device/numa_node", dev) >= 0)
        out->numa_node = atoi(v);

    /* GIDs: collect the non-zero ones, then order them by preference. */
    gw_verbs_gid_t cand[64];
    int n = 0, zeros = 0, v1_only = 0;
    for (int i = 0; i < 4096 && zeros < 128 && n < (int)GW_ARRAY_SIZE(cand); i++) {
        uint8_t raw[16];
        if (read_attr(P, v, sizeof(v), "class/infiniband/%s/ports/%d/gids/%d", dev, port, i) < 0)
            break; /* past the table */
        if (parse_gid(v, raw) != 0 || gid_is_zero(raw)) {
            zeros++;
            continue;
        }
        zeros = 0;
        gw_verbs_gid_t *g = &cand[n];
        memset(g, 0, sizeof(*g));
        g->index = (uint8_t)(i > 255 ? 255 : i);
        memcpy(g->raw, raw, 16);
        g->v4 = (uint8_t)gid_is_v4(raw);
        g->link_local = raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80;
        if (out->link_layer == GW_VERBS_LL_ETH) {
            char t[64];
            if (read_attr(P, t, sizeof(t), "class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port, i) < 0)
                continue;
            if (strstr(t, "v2"))
                g->type = GW_GID_ROCE_V2;
            else {
                g->type = GW_GID_ROCE_V1;
                v1_only++;
                continue; /* RoCE v1 is not routable: not used */
            }
            read_attr(P, g->ndev, sizeof(g->ndev), "class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d",
                      dev, port, i);
            if (i > 255)
                continue; /* ibv_ah_attr.grh.sgid_index is 8 bits */
        } else {
            g->type = GW_GID_IB;
            if (i != 0)
                continue; /* IB: GID 0 carries the subnet prefix; LIDs address */
        }
        n++;
    }
    /* stable insertion sort by rank, index order within a rank */
    for (int i = 1; i < n; i++) {
        gw_verbs_gid_t t = cand[i];
        int j = i;
        while (j > 0 && gid_rank(&cand[j - 1]) > gid_rank(&t)) {
            cand[j] = cand[j - 1];
            j--;
        }
        cand[j] = t;
    }
    out->ngids = GW_MIN(n, GW_VERBS_MAX_GIDS);
    memcpy(out->gids, cand, (size_t)out->ngids * sizeof(cand[0]));
    if (!out->active)
        snprintf(out->note, sizeof(out->note), "port not ACTIVE");
    else if (out->link_layer == GW_VERBS_LL_ETH && out->ngids == 0)
        snprintf(out->note, sizeof(out->note), "no RoCE v2 GID (%d RoCE v1 only; is an IP address "
                 "configured on its netdev?)", v1_only);
    else if (out->link_layer == GW_VERBS_LL_IB && (out->lid == 0 || out->ngids == 0))
        snprintf(out->note, sizeof(out->note), "InfiniBand port without a LID (subnet manager "
                 "running?)");
    return 0;
}

static int dev_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

#define APPEND(buf, len, used, ...)                                                            \
    do {                                                                                       \
        if ((used) < (len))                                                                    \
            (used) += (size_t)snprintf((buf) + (used), (len) - (used), __VA_ARGS__);           \
    } while (0)

gw_status_t gw_verbs_port_select(const char *root, const char *want, int gid_index, int numa_node,
                                 gw_verbs_port_t *out, char *why, size_t whylen)
{
    char wdev[64] = "";
    int wport = 0;
    if (want && *want) {
        const char *colon = strrchr(want, ':');
        size_t dl = colon ? (size_t)(colon - want) : strlen(want);
        if (dl == 0 || dl >= sizeof(wdev) || (colon && (wport = atoi(colon + 1)) <= 0)) {
            snprintf(why, whylen, "GPUWIRE_IB_DEVICE=\"%s\": expected DEVICE or DEVICE:PORT, e.g. "
                     "mlx5_0:1", want);
            return GW_ERR_CONFIG;
        }
        memcpy(wdev, want, dl);
        wdev[dl] = '\0';
    }
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/class/infiniband", root);
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, whylen, "no RDMA devices (%s: %s)", dir, strerror(errno));
        return GW_ERR_UNAVAILABLE;
    }
    char *names[64];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nn < 64) {
        if (de->d_name[0] == '.')
            continue;
        names[nn] = strdup(de->d_name);
        if (names[nn])
            nn++;
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof(names[0]), dev_cmp);

    size_t used = 0;
    why[0] = '\0';
    int found = 0, best_score = -1;
    gw_verbs_port_t cand;
    for (int i = 0; i < nn; i++) {
        if (wdev[0] && strcmp(names[i], wdev) != 0)
            continue;
        for (int p = 1; p <= 32; p++) {
            if (wport && p != wport)
                continue;
            if (gw_verbs_port_read(root, names[i], p, &cand) != 0)
                break;
            if (cand.active && gid_index >= 0 && cand.link_layer == GW_VERBS_LL_ETH) {
                /* the setting names the GID: keep just that one, if usable */
                int k, hit = -1;
                for (k = 0; k < cand.ngids; k++)
                    if (cand.gids[k].index == gid_index)
                        hit = k;
                if (hit < 0) {
                    snprintf(cand.note, sizeof(cand.note), "GPUWIRE_IB_GID_INDEX=%d is not a "
                             "RoCE v2 GID of this port", gid_index);
                } else {
                    cand.gids[0] = cand.gids[hit];
                    cand.ngids = 1;
                }
            }
            if (cand.note[0]) {
                APPEND(why, whylen, used, "%s%s:%d %s", used ? "; " : "", names[i], p, cand.note);
                continue;
            }
            /* nearest to the memory first, then name order */
            int score = (numa_node >= 0 && cand.numa_node == numa_node) ? 2 : 1;
            if (score > best_score) {
                *out = cand;
                best_score = score;
                found = 1;
            }
        }
    }
    for (int i = 0; i < nn; i++)
        free(names[i]);
    if (!found) {
        if (wdev[0] && used == 0)
            snprintf(why, whylen, "GPUWIRE_IB_DEVICE=%s: no such device/port under %s", want, dir);
        else if (nn == 0)
            snprintf(why, whylen, "no RDMA devices in %s", dir);
        else {
            char tmp[512];
            snprintf(tmp, sizeof(tmp), "no usable RDMA port: %s", why);
            snprintf(why, whylen, "%s", tmp);
        }
        return wdev[0] ? GW_ERR_NOT_FOUND : GW_ERR_UNAVAILABLE;
    }
    char g[64] = "";
    if (out->ngids)
        gw_verbs_gid_str(out->gids[0].raw, g, sizeof(g));
    snprintf(why, whylen, "%s:%d (%s%s%s)", out->dev, out->port,
             wdev[0] ? "GPUWIRE_IB_DEVICE" : best_score == 2 ? "same NUMA node as the memory"
                                                             : "first active port",
             out->link_layer == GW_VERBS_LL_ETH ? ", RoCE, best GID " : ", InfiniBand",
             out->link_layer == GW_VERBS_LL_ETH ? g : "");
    return GW_OK;
}

/* ---- GID pairing ------------------------------------------------------------ */

static int family(const gw_verbs_gid_t *g)
{
    if (g->type == GW_GID_IB)
        return 0;
    return g->v4 ? 1 : (g->link_local ? 3 : 2);
}

/* IPv4 netmask of the local address a.b.c.d, 0 if unknown. */
static uint32_t v4_mask(const uint8_t raw[16])
{
    struct ifaddrs *ifa = NULL, *p;
    uint32_t mask = 0, want;
    memcpy(&want, raw + 12, 4);
    if (getifaddrs(&ifa) != 0)
        return 0;
    for (p = ifa; p; p = p->ifa_next) {
        if (!p->ifa_addr || !p->ifa_netmask || p->ifa_addr->sa_family != AF_INET)
            continue;
        if (((struct sockaddr_in *)p->ifa_addr)->sin_addr.s_addr == want) {
            mask = ((struct sockaddr_in *)p->ifa_netmask)->sin_addr.s_addr;
            break;
        }
    }
    freeifaddrs(ifa);
    return mask;
}

int gw_verbs_gid_pair(const gw_verbs_gid_t *own, int nown, const gw_verbs_gid_t *peer, int npeer,
                      int *own_i, int *peer_i, char *why, size_t whylen)
{
    static const char *const fam_name[] = {"IB", "IPv4", "IPv6", "IPv6 link-local"};
    /* families in preference order: IB, IPv4, global IPv6, then link-local
     * (only when nothing routable is common: it reaches on-link peers only) */
    for (int f = 0; f <= 3; f++) {
        int oi = -1, pi = -1;
        for (int i = 0; i < nown && oi < 0; i++)
            if (family(&own[i]) == f)
                oi = i;
        for (int j = 0; j < npeer && pi < 0; j++)
            if (family(&peer[j]) == f)
                pi = j;
        if (oi < 0 || pi < 0)
            continue;
        if (f == 1) {
            /* prefer an own address on the same subnet as one of the peer's */
            for (int i = 0; i < nown; i++) {
                if (family(&own[i]) != 1)
                    continue;
                uint32_t m = v4_mask(own[i].raw), a, b;
                if (!m)
                    continue;
                memcpy(&a, own[i].raw + 12, 4);
                for (int j = 0; j < npeer; j++) {
                    memcpy(&b, peer[j].raw + 12, 4);
                    if (family(&peer[j]) == 1 && (a & m) == (b & m)) {
                        *own_i = i;
                        *peer_i = j;
                        return 0;
                    }
                }
            }
        }
        *own_i = oi;
        *peer_i = pi;
        return 0;
    }
    size_t used = 0;
    APPEND(why, whylen, used, "no common GID family: local");
    for (int i = 0; i < nown; i++)
        APPEND(why, whylen, used, " %d:%s", own[i].index, fam_name[family(&own[i])]);
    APPEND(why, whylen, used, "%s, peer", nown ? "" : " none");
    for (int j = 0; j < npeer; j++)
        APPEND(why, whylen, used, " %d:%s", peer[j].index, fam_name[family(&peer[j])]);
    APPEND(why, whylen, used, "%s", npeer ? "" : " none");
    return -1;
}

/* ---- address blob -------------------------------------------------------------
 * u8 version, u8 link_layer, u8 port, u8 mtu, u16 lid, u8 nqps, u8 ngids,
 * u32 max_msg, u8 subnet[8], char dev[32],
 * nqps x (u32 qpn, u32 psn), ngids x (u8 index, u8 type, u8 raw[16]) */
size_t gw_verbs_addr_pack(const gw_verbs_addr_t *a, uint8_t *buf, size_t cap)
{
    size_t need = 12 + 8 + 32 + (size_t)a->nqps * 8 + (size_t)a->ngids * 18 + 4;
    if (cap < need)
        return 0;
    uint8_t *p = buf;
    p[0] = a->version;
    p[1] = a->link_layer;
    p[2] = a->port;
    p[3] = a->mtu;
    gw_put_u16(p + 4, a->lid);
    p[6] = a->nqps;
    p[7] = a->ngids;
    gw_put_u32(p + 8, a->max_msg);
    p += 12;
    memcpy(p, a->subnet, 8);
    p += 8;
    memset(p, 0, 32);
    memcpy(p, a->dev, strnlen(a->dev, 31));
    p += 32;
    for (int i = 0; i < a->nqps; i++) {
        gw_put_u32(p, a->qpn[i]);
        gw_put_u32(p + 4, a->psn[i]);
        p += 8;
    }
    for (int i = 0; i < a->ngids; i++) {
        p[0] = a->gids[i].index;
        p[1] = a->gids[i].type;
        memcpy(p + 2, a->gids[i].raw, 16);
        p += 18;
    }
    gw_put_u32(p, a->features);
    return need;
}

gw_status_t gw_verbs_addr_unpack(gw_verbs_addr_t *a, const uint8_t *buf, size_t len)
{
    memset(a, 0, sizeof(*a));
    if (len < 52 || buf[0] != GW_VERBS_ADDR_VERSION)
        return GW_ERR_PROTOCOL;
    a->version = buf[0];
    a->link_layer = buf[1];
    a->port = buf[2];
    a->mtu = buf[3];
    a->lid = gw_get_u16(buf + 4);
    a->nqps = buf[6];
    a->ngids = buf[7];
    a->max_msg = gw_get_u32(buf + 8);
    if (a->nqps == 0 || a->nqps > GW_VERBS_MAX_QPS || a->ngids > GW_VERBS_MAX_GIDS ||
        (a->link_layer != GW_VERBS_LL_IB && a->link_layer != GW_VERBS_LL_ETH) || a->mtu < 1 ||
        a->mtu > 5)
        return GW_ERR_PROTOCOL;
    if (len < 52 + (size_t)a->nqps * 8 + (size_t)a->ngids * 18)
        return GW_ERR_PROTOCOL;
    memcpy(a->subnet, buf + 12, 8);
    memcpy(a->dev, buf + 20, 31);
    a->dev[31] = '\0';
    const uint8_t *p = buf + 52;
    for (int i = 0; i < a->nqps; i++) {
        a->qpn[i] = gw_get_u32(p) & 0xffffff;
        a->psn[i] = gw_get_u32(p + 4) & 0xffffff;
        p += 8;
    }
    for (int i = 0; i < a->ngids; i++) {
        a->gids[i].index = p[0];
        a->gids[i].type = p[1];
        memcpy(a->gids[i].raw, p + 2, 16);
        a->gids[i].v4 = (uint8_t)gid_is_v4(a->gids[i].raw);
        a->gids[i].link_local = a->gids[i].raw[0] == 0xfe && (a->gids[i].raw[1] & 0xc0) == 0x80;
        if (a->gids[i].type > GW_GID_ROCE_V2)
            return GW_ERR_PROTOCOL;
        p += 18;
    }
    /* fields appended later are read when present: a shorter blob is a peer
     * built before them (features 0); bytes after them are for later still */
    if ((size_t)(p - buf) + 4 <= len)
        a->features = gw_get_u32(p);
    return GW_OK;
}
