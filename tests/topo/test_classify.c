/* SPDX-License-Identifier: Apache-2.0 */
/* test_classify.c - topology of recorded sysfs trees: matrix, nearest NIC,
 * NVLink from a file and from a hook, odd entries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "harness.h"
#include "topo/topo.h"

static gw_topo_t *load(const fx_t *f, const gw_topo_opts_t *o)
{
    char err[512] = "";
    gw_topo_t *t = NULL;
    gw_status_t st = gw_topo_create(f->sys, o, &t, err, sizeof(err));
    if (st != GW_OK) {
        fprintf(stderr, "gw_topo_create(%s): %s: %s\n", f->sys, gw_status_name(st), err);
        exit(1);
    }
    return t;
}

static const char *cell(const gw_topo_t *t, const char *a, const char *b)
{
    static char buf[8][16];
    static int k;
    int i = gw_topo_find(t, a), j = gw_topo_find(t, b);
    if (i < 0 || j < 0)
        return "missing";
    char *out = buf[k++ % 8];
    if (t->link[i][j] == GW_LINK_NV && t->nvlinks[i][j] > 0)
        snprintf(out, 16, "NV%d", t->nvlinks[i][j]);
    else
        snprintf(out, 16, "%s", gw_topo_link_name(t->link[i][j]));
    return out;
}

#define CHECK_CELL(t, a, b, want)                                                              \
    do {                                                                                       \
        const char *got_ = cell((t), (a), (b));                                                \
        if (strcmp(got_, (want)) != 0) {                                                       \
            fprintf(stderr, "%s:%d: %s-%s is %s, expected %s\n", __FILE__, __LINE__, (a), (b), \
                    got_, (want));                                                             \
            gwt_failures++;                                                                    \
        }                                                                                      \
    } while (0)

static char *print_to_string(const gw_topo_t *t, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    REQUIRE(f);
    if (json)
        gw_topo_print_json(t, f);
    else
        gw_topo_print(t, f);
    fclose(f);
    return buf;
}

static const char *nearest_name(const gw_topo_t *t, int g, int x)
{
    return x < t->nnearest[g] ? t->dev[t->nearest[g][x]].name : "(none)";
}

static void test_cloudvm(void)
{
    fx_t f;
    fx_build(&f, "cloudvm");
    gw_topo_t *t = load(&f, NULL);
    CHECK(t->ngpu == 4);
    CHECK(t->nnic == 0);
    CHECK(t->nnodes == 1);
    for (int i = 0; i < 4; i++) {
        CHECK(t->nnearest[i] == 0);
        CHECK(t->dev[i].numa == -1);
        CHECK(t->dev[i].nchain == 0);
        CHECK(!strcmp(t->dev[i].root_complex, "pci0000:00"));
        CHECK(t->dev[i].bar1_size == (1ull << 34));
        for (int j = 0; j < 4; j++)
            CHECK(t->link[i][j] == (i == j ? GW_LINK_SELF : GW_LINK_PHB));
    }
    CHECK(!strcmp(t->dev[0].bdf, "0000:00:04.0"));
    CHECK(!strcmp(t->dev[3].name, "GPU3"));
    char *txt = print_to_string(t, 0);
    CHECK(strstr(txt, "GPU0    X      PHB    PHB    PHB"));
    CHECK(strstr(txt, "GPU0 0000:00:04.0: none"));
    free(txt);
    char nic[32], why[256];
    CHECK_ST(gw_topo_default_nic(f.sys, "0000:00:04.0", nic, sizeof(nic), why, sizeof(why)),
             GW_ERR_NOT_FOUND);
    CHECK(strstr(why, "no RDMA device"));
    gw_topo_destroy(t);
    fx_remove(&f);
}

/* dgx8: expected GPU-NIC classes.  Switch k holds GPU 2k, 2k+1 and mlx5_k;
 * switches 0,1 on NUMA node 0, 2,3 on node 1, each on its own root complex. */
static const char *dgx_expect(int g, int n)
{
    int sw = g / 2;
    if (sw == n)
        return "PIX";
    return (sw < 2) == (n < 2) ? "NODE" : "SYS";
}

static int nvhook_calls;
static int nv_same_switch(void *arg, const gw_topo_dev_t *a, const gw_topo_dev_t *b)
{
    (void)arg;
    nvhook_calls++;
    /* same switch: the same root complex */
    return strcmp(a->root_complex, b->root_complex) == 0 ? 4 : 0;
}
static int nv_unknown_count(void *arg, const gw_topo_dev_t *a, const gw_topo_dev_t *b)
{
    (void)arg;
    (void)a;
    (void)b;
    return -1;
}

static void test_dgx8(void)
{
    fx_t f;
    fx_build(&f, "dgx8");
    /* PCIe only ("" turns the recorded NVLink file off) */
    gw_topo_opts_t pcie_only = {sizeof(pcie_only), NULL, NULL, ""};
    gw_topo_t *t = load(&f, &pcie_only);
    CHECK(t->ngpu == 8);
    CHECK(t->nnic == 4);
    CHECK(t->nnodes == 2);
    const char *gpus[] = {"GPU0", "GPU1", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6", "GPU7"};
    const char *nics[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
    for (int g = 0; g < 8; g++) {
        for (int n = 0; n < 4; n++) {
            CHECK_CELL(t, gpus[g], nics[n], dgx_expect(g, n));
            CHECK_CELL(t, nics[n], gpus[g], dgx_expect(g, n));
        }
        CHECK(t->nnearest[g] == 1);
        CHECK(!strcmp(nearest_name(t, g, 0), nics[g / 2]));
        /* switch ports came from config space, not inference */
        CHECK(t->dev[g].nchain == 3);
        CHECK(t->dev[g].chain[0].port_type == GW_PCIE_ROOT_PORT && t->dev[g].chain[0].type_from_cfg);
        CHECK(t->dev[g].chain[1].port_type == GW_PCIE_UPSTREAM && t->dev[g].chain[1].type_from_cfg);
        CHECK(t->dev[g].chain[2].port_type == GW_PCIE_DOWNSTREAM && t->dev[g].chain[2].type_from_cfg);
        CHECK(t->dev[g].numa == (g < 4 ? 0 : 1));
        CHECK(t->dev[g].bar1_size == (1ull << 37));
        CHECK(!strcmp(t->dev[g].driver, "nvidia"));
    }
    CHECK_CELL(t, "GPU0", "GPU1", "PIX");
    CHECK_CELL(t, "GPU0", "GPU2", "NODE");
    CHECK_CELL(t, "GPU0", "GPU7", "SYS");
    CHECK_CELL(t, "mlx5_0", "mlx5_1", "NODE");
    CHECK_CELL(t, "mlx5_0", "mlx5_3", "SYS");
    CHECK_CELL(t, "GPU5", "GPU5", "X");
    /* NIC details */
    const gw_topo_dev_t *n0 = &t->dev[gw_topo_find(t, "mlx5_0")];
    CHECK(!strcmp(n0->bdf, "0000:05:00.0"));
    CHECK(!strcmp(n0->driver, "mlx5_core"));
    CHECK(n0->nnetdevs == 1 && !strcmp(n0->netdevs[0], "ibp5s0"));
    CHECK(n0->nports == 1 && n0->ports[0].state == 4 && n0->ports[0].phys_state == 5);
    CHECK(!strcmp(n0->ports[0].link_layer, "InfiniBand"));
    CHECK(!strcmp(n0->ports[0].state_str, "ACTIVE"));
    CHECK(n0->ports[0].n_gids == 1);
    /* the path between GPU0 and mlx5_0: downstream, upstream (common), downstream */
    const gw_topo_bridge_t *path[8];
    int np = gw_topo_path_bridges(t, 0, gw_topo_find(t, "mlx5_0"), path, 8);
    CHECK(np == 3);
    if (np == 3) {
        CHECK(!strcmp(path[0]->bdf, "0000:01:00.0"));
        CHECK(!strcmp(path[1]->bdf, "0000:02:00.0"));
        CHECK(!strcmp(path[2]->bdf, "0000:02:02.0"));
    }
    CHECK(gw_topo_path_bridges(t, 0, gw_topo_find(t, "mlx5_1"), path, 8) == 0);
    /* lookups */
    CHECK(gw_topo_find(t, "0000:24:00.0") == 3);
    CHECK(gw_topo_find(t, "24:00.0") == 3);
    CHECK(gw_topo_find(t, "0000:A4:00.0") == 7);
    CHECK(gw_topo_find(t, "4:00.0") == -1);
    CHECK(gw_topo_find(t, "mlx5_9") == -1);
    char nic[32], why[256];
    CHECK_ST(gw_topo_default_nic(f.sys, "0000:24:00.0", nic, sizeof(nic), why, sizeof(why)), GW_OK);
    CHECK(!strcmp(nic, "mlx5_1"));
    CHECK_ST(gw_topo_default_nic(f.sys, "a4:00.0", nic, sizeof(nic), why, sizeof(why)), GW_OK);
    CHECK(!strcmp(nic, "mlx5_3"));
    CHECK(strstr(why, "PIX"));
    CHECK_ST(gw_topo_default_nic(f.sys, "0000:99:00.0", nic, sizeof(nic), why, sizeof(why)),
             GW_ERR_NOT_FOUND);
    char *js = print_to_string(t, 1);
    CHECK(strstr(js, "\"nearest_nic\":{\"GPU0\":[\"mlx5_0\"],\"GPU1\":[\"mlx5_0\"],\"GPU2\":[\"mlx5_1\"]"));
    CHECK(strstr(js, "[\"X\",\"PIX\",\"NODE\",\"NODE\",\"SYS\",\"SYS\",\"SYS\",\"SYS\",\"PIX\",\"NODE\",\"SYS\",\"SYS\"]"));
    CHECK(strstr(js, "\"bar1_bytes\":137438953472"));
    free(js);
    gw_topo_destroy(t);

    /* NVLink from the recorded file, named or found in the tree */
    gw_topo_opts_t o = {sizeof(o), NULL, NULL, f.nvlink};
    t = load(&f, &o);
    CHECK_CELL(t, "GPU3", "GPU4", "NV12");
    gw_topo_destroy(t);
    t = load(&f, NULL);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++)
            if (i != j)
                CHECK_CELL(t, gpus[i], gpus[j], "NV12");
    CHECK_CELL(t, "GPU0", "mlx5_0", "PIX"); /* NICs unaffected */
    CHECK(t->note[0] == '\0');
    char *txt = print_to_string(t, 0);
    CHECK(strstr(txt, "GPU0    X      NV12   NV12"));
    CHECK(strstr(txt, "NIC0: mlx5_0 [verbs] (ibp5s0)"));
    free(txt);
    gw_topo_destroy(t);

    /* NVLink from a hook (what the CUDA driver reports) */
    gw_topo_opts_t oh = {sizeof(oh), nv_same_switch, NULL, ""};
    t = load(&f, &oh);
    CHECK(nvhook_calls == 28);
    CHECK_CELL(t, "GPU0", "GPU1", "NV4");
    CHECK_CELL(t, "GPU0", "GPU2", "NODE");
    CHECK_CELL(t, "GPU6", "GPU7", "NV4");
    gw_topo_destroy(t);
    gw_topo_opts_t ou = {sizeof(ou), nv_unknown_count, NULL, ""};
    t = load(&f, &ou);
    CHECK_CELL(t, "GPU0", "GPU5", "NV");
    gw_topo_destroy(t);
    fx_remove(&f);
}

static void test_acs_tree(void)
{
    fx_t f;
    fx_build(&f, "acs");
    gw_topo_t *t = load(&f, NULL);
    CHECK(t->ngpu == 2 && t->nnic == 1);
    CHECK_CELL(t, "GPU0", "mlx5_0", "PIX");
    CHECK_CELL(t, "GPU1", "mlx5_0", "PXB"); /* behind a second, cascaded switch */
    CHECK_CELL(t, "GPU0", "GPU1", "PXB");
    CHECK(t->nnearest[0] == 1 && t->nnearest[1] == 1);
    CHECK(t->dev[0].bar1_size == 256ull << 20);
    const gw_topo_dev_t *n = &t->dev[2];
    CHECK(!strcmp(n->ports[0].link_layer, "Ethernet"));
    CHECK(n->ports[0].n_gids == 4 && n->ports[0].n_rocev2 == 2 && n->ports[0].n_rocev1 == 2);
    CHECK(!strcmp(n->ports[0].netdev, "ens4np0"));
    CHECK(n->ports[0].netdev_mtu == 1500);
    gw_topo_destroy(t);
    fx_remove(&f);
}

static void test_numa(void)
{
    fx_t f;
    fx_build(&f, "numa");
    gw_topo_t *t = load(&f, NULL);
    CHECK(t->ngpu == 2 && t->nnic == 2);
    CHECK_CELL(t, "GPU0", "GPU1", "NODE");
    CHECK_CELL(t, "GPU0", "mlx5_0", "SYS");
    CHECK_CELL(t, "GPU1", "mlx5_1", "SYS");
    CHECK_CELL(t, "mlx5_0", "mlx5_1", "PIX"); /* two functions of one card */
    /* mlx5_1's port is down: only the active NIC is a candidate */
    for (int g = 0; g < 2; g++) {
        CHECK(t->nnearest[g] == 1);
        CHECK(!strcmp(nearest_name(t, g, 0), "mlx5_0"));
    }
    CHECK(t->dev[3].ports[0].state == 1);
    gw_topo_destroy(t);
    fx_remove(&f);
}

static void test_broken(void)
{
    fx_t f;
    fx_build(&f, "broken");
    gw_topo_opts_t o = {sizeof(o), NULL, NULL, f.nvlink};
    gw_topo_t *t = load(&f, &o);
    CHECK(t->ngpu == 2); /* the NVIDIA function with class "zz" is left out, with a note */
    CHECK(strstr(t->note, "0000:00:1f.0"));
    CHECK(strstr(t->note, "nvlink.txt:1"));
    CHECK(strstr(t->note, "nvlink.txt:3"));
    CHECK_CELL(t, "GPU0", "GPU1", "PHB"); /* nothing from the malformed file */
    const gw_topo_dev_t *g0 = &t->dev[0], *g1 = &t->dev[1];
    CHECK(g0->numa == -1 && strstr(g0->note, "NUMA node unknown"));
    CHECK(g0->bar1_size == 0 && strstr(g0->note, "BAR1 unknown"));
    CHECK(g1->bar1_size == 0 && strstr(g1->note, "unparsable"));
    /* switch ports without readable config: types inferred from position */
    CHECK(g0->nchain == 3 && !g0->chain[1].type_from_cfg && g0->chain[1].port_type == GW_PCIE_UPSTREAM);
    CHECK(g0->chain[2].port_type == GW_PCIE_DOWNSTREAM && g0->chain[0].type_from_cfg);
    int m0 = gw_topo_find(t, "mlx5_0"), m1 = gw_topo_find(t, "mlx5_1");
    REQUIRE(m0 >= 0 && m1 >= 0);
    CHECK(t->dev[m0].bdf[0] == '\0' && strstr(t->dev[m0].note, "no PCI device"));
    CHECK(t->link[0][m0] == GW_LINK_UNKNOWN && t->link[m0][1] == GW_LINK_UNKNOWN);
    CHECK(t->dev[m0].ports[0].state == -1 && strstr(t->dev[m0].ports[0].note, "state unknown"));
    CHECK_CELL(t, "GPU0", "mlx5_1", "PIX");
    CHECK_CELL(t, "GPU1", "mlx5_1", "PHB");
    CHECK(t->dev[m1].ports[0].netdev_mtu == -1 && strstr(t->dev[m1].ports[0].note, "abc"));
    CHECK(t->nnearest[0] == 1 && t->nearest[0][0] == m1);
    char *txt = print_to_string(t, 0);
    CHECK(strstr(txt, "Notes:"));
    CHECK(strstr(txt, "NIC0    ?      ?      X"));
    free(txt);
    char *js = print_to_string(t, 1);
    CHECK(strstr(js, "\"pci\":\"\""));
    free(js);
    gw_topo_destroy(t);
    fx_remove(&f);

    /* not a tree at all */
    char err[256];
    gw_topo_t *none = NULL;
    CHECK_ST(gw_topo_create("/nonexistent/gpuwire-sysfs", NULL, &none, err, sizeof(err)), GW_ERR_NOT_FOUND);
    CHECK(none == NULL && strstr(err, "GPUWIRE_SYSFS_ROOT"));
    CHECK_ST(gw_topo_create("/", NULL, NULL, err, sizeof(err)), GW_ERR_INVALID);
    gw_topo_opts_t bad = {1, NULL, NULL, NULL};
    CHECK_ST(gw_topo_create("/", &bad, &none, err, sizeof(err)), GW_ERR_INVALID);
}

/* NICs that libfabric reaches: EFA devices (RDMA devices of Amazon's
 * vendor id, driver efa) and CXI NICs (class/cxi) take their place in the
 * matrix and as a GPU's nearest NIC, marked with their fabric. */
static void test_ofi_nics(void)
{
    fx_t f;
    fx_build(&f, "efa");
    gw_topo_t *t = load(&f, NULL);
    CHECK(t->ngpu == 4 && t->nnic == 2);
    int k = gw_topo_find(t, "rdmap21s0");
    REQUIRE(k >= t->ngpu);
    CHECK(strcmp(t->dev[k].fabric, "efa") == 0 && strcmp(t->dev[k].driver, "efa") == 0);
    CHECK(strcmp(t->dev[k].bdf, "0000:15:00.0") == 0 && t->dev[k].nports == 1 && t->dev[k].ports[0].state == 4);
    CHECK_CELL(t, "GPU0", "rdmap21s0", "PIX");
    CHECK_CELL(t, "GPU0", "rdmap149s0", "SYS");
    CHECK(t->nnearest[0] == 1 && t->nearest[0][0] == k);
    char nic[64], why[256];
    CHECK(gw_topo_default_nic(f.sys, "0000:93:00.0", nic, sizeof(nic), why, sizeof(why)) == GW_OK &&
          strcmp(nic, "rdmap149s0") == 0);
    char *txt = print_to_string(t, 0);
    CHECK(strstr(txt, "rdmap21s0 [efa]"));
    free(txt);
    txt = print_to_string(t, 1);
    CHECK(strstr(txt, "\"fabric\":\"efa\""));
    free(txt);
    gw_topo_destroy(t);
    fx_remove(&f);

    fx_build(&f, "cxi");
    t = load(&f, NULL);
    CHECK(t->ngpu == 2 && t->nnic == 1);
    k = gw_topo_find(t, "cxi0");
    REQUIRE(k >= t->ngpu);
    const gw_topo_dev_t *d = &t->dev[k];
    CHECK(strcmp(d->fabric, "cxi") == 0 && strcmp(d->bdf, "0000:04:00.0") == 0 && d->nnetdevs == 1 &&
          strcmp(d->netdevs[0], "hsn0") == 0);
    CHECK(d->nports == 1 && d->ports[0].state == 4 && strcmp(d->ports[0].netdev, "hsn0") == 0 &&
          d->ports[0].netdev_mtu == 9000 && strstr(d->ports[0].rate, "200"));
    CHECK_CELL(t, "GPU0", "cxi0", "PIX");
    CHECK_CELL(t, "GPU1", "cxi0", "PHB");
    CHECK(t->nnearest[0] == 1 && t->nearest[0][0] == k && t->nnearest[1] == 1);
    txt = print_to_string(t, 0);
    CHECK(strstr(txt, "cxi0 [cxi] (hsn0)"));
    free(txt);
    gw_topo_destroy(t);
    fx_remove(&f);
}

int main(void)
{
    test_cloudvm();
    test_dgx8();
    test_acs_tree();
    test_numa();
    test_broken();
    test_ofi_nics();
    return gwt_done("topo_classify");
}
