/* SPDX-License-Identifier: Apache-2.0 */
/* verbs_select.c - port and GID choice on fake sysfs trees (no RDMA device
 * needed), the address blob, and the libibverbs loader's absent/present
 * reporting.  Runs on any machine. */
#include <errno.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "transport/verbs/verbs.h"

static char root[256];

static void mkpath(const char *path)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    }
    mkdir(tmp, 0755);
}

static void put_file(const char *content, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_file(const char *content, const char *fmt, ...)
{
    char path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", path);
    *strrchr(dir, '/') = '\0';
    mkpath(dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL);
    fprintf(f, "%s\n", content);
    fclose(f);
}

/* A RoCE port: gid 0 link-local v2, gid 1 IPv4 v2, gid 2 IPv4 v1, gid 3 zero */
static void make_roce(const char *dev, int port, const char *state, const char *v4hex, int numa)
{
    const char *P = root;
    put_file(state, "%s/class/infiniband/%s/ports/%d/state", P, dev, port);
    put_file("Ethernet", "%s/class/infiniband/%s/ports/%d/link_layer", P, dev, port);
    put_file("0x0", "%s/class/infiniband/%s/ports/%d/lid", P, dev, port);
    put_file("fe80:0000:0000:0000:cc50:a3ff:fe1a:95ff", "%s/class/infiniband/%s/ports/%d/gids/0", P, dev, port);
    put_file("RoCE v2", "%s/class/infiniband/%s/ports/%d/gid_attrs/types/0", P, dev, port);
    char g[64];
    snprintf(g, sizeof(g), "0000:0000:0000:0000:0000:ffff:%s", v4hex);
    put_file(g, "%s/class/infiniband/%s/ports/%d/gids/1", P, dev, port);
    put_file("RoCE v2", "%s/class/infiniband/%s/ports/%d/gid_attrs/types/1", P, dev, port);
    put_file("eth0", "%s/class/infiniband/%s/ports/%d/gid_attrs/ndevs/1", P, dev, port);
    put_file(g, "%s/class/infiniband/%s/ports/%d/gids/2", P, dev, port);
    put_file("IB/RoCE v1", "%s/class/infiniband/%s/ports/%d/gid_attrs/types/2", P, dev, port);
    put_file("0000:0000:0000:0000:0000:0000:0000:0000", "%s/class/infiniband/%s/ports/%d/gids/3", P, dev, port);
    if (numa >= 0) {
        char n[16];
        snprintf(n, sizeof(n), "%d", numa);
        put_file(n, "%s/class/infiniband/%s/device/numa_node", P, dev);
    }
}

static void make_ib(const char *dev, int port, const char *state, const char *lid)
{
    const char *P = root;
    put_file(state, "%s/class/infiniband/%s/ports/%d/state", P, dev, port);
    put_file("InfiniBand", "%s/class/infiniband/%s/ports/%d/link_layer", P, dev, port);
    put_file(lid, "%s/class/infiniband/%s/ports/%d/lid", P, dev, port);
    put_file("fe80:0000:0000:0000:0002:c903:0001:0001", "%s/class/infiniband/%s/ports/%d/gids/0", P, dev, port);
}

static void test_select(void)
{
    snprintf(root, sizeof(root), "/tmp/gw-sysfs-%d", (int)getpid());
    char why[512];
    gw_verbs_port_t p;
    /* empty tree: absent, said plainly */
    mkpath(root);
    CHECK_ST(gw_verbs_port_select(root, "", -1, -1, &p, why, sizeof(why)), GW_ERR_UNAVAILABLE);
    fprintf(stderr, "empty: %s\n", why);
    CHECK(strstr(why, "no RDMA devices") != NULL);

    make_roce("mlx5_0", 1, "1: DOWN", "c0a8:4d01", 0);
    make_roce("mlx5_1", 1, "4: ACTIVE", "0a00:0001", 1);
    make_roce("mlx5_2", 1, "4: ACTIVE", "0a00:0002", 0);
    make_ib("mlx4_0", 1, "4: ACTIVE", "0x0");
    /* default: first active port in name order; candidates rejected are skipped */
    REQUIRE_OK(gw_verbs_port_select(root, "", -1, -1, &p, why, sizeof(why)));
    fprintf(stderr, "default: %s\n", why);
    CHECK(!strcmp(p.dev, "mlx5_1") && p.port == 1);
    CHECK(p.link_layer == GW_VERBS_LL_ETH);
    /* GIDs: v2 IPv4 first, then v2 link-local; v1 and zero dropped */
    CHECK(p.ngids == 2);
    CHECK(p.gids[0].index == 1 && p.gids[0].v4 && p.gids[0].type == GW_GID_ROCE_V2);
    CHECK(p.gids[1].index == 0 && p.gids[1].link_local);
    CHECK(!strcmp(p.gids[0].ndev, "eth0"));
    /* nearest to the memory: NUMA node 0 picks mlx5_2 (mlx5_0 is down) */
    REQUIRE_OK(gw_verbs_port_select(root, "", -1, 0, &p, why, sizeof(why)));
    CHECK(!strcmp(p.dev, "mlx5_2"));
    CHECK(strstr(why, "NUMA") != NULL);
    /* named device and port */
    REQUIRE_OK(gw_verbs_port_select(root, "mlx5_2:1", -1, -1, &p, why, sizeof(why)));
    CHECK(!strcmp(p.dev, "mlx5_2"));
    CHECK_ST(gw_verbs_port_select(root, "mlx5_0:1", -1, -1, &p, why, sizeof(why)), GW_ERR_NOT_FOUND);
    fprintf(stderr, "down: %s\n", why);
    CHECK(strstr(why, "mlx5_0:1 port not ACTIVE") != NULL);
    CHECK_ST(gw_verbs_port_select(root, "nosuch:1", -1, -1, &p, why, sizeof(why)), GW_ERR_NOT_FOUND);
    CHECK(strstr(why, "nosuch") != NULL);
    CHECK_ST(gw_verbs_port_select(root, ":1", -1, -1, &p, why, sizeof(why)), GW_ERR_CONFIG);
    CHECK_ST(gw_verbs_port_select(root, "mlx5_1:x", -1, -1, &p, why, sizeof(why)), GW_ERR_CONFIG);
    /* GID index override: 0 (link-local) kept alone; 2 (v1) refused with the reason */
    REQUIRE_OK(gw_verbs_port_select(root, "mlx5_1", 0, -1, &p, why, sizeof(why)));
    CHECK(p.ngids == 1 && p.gids[0].index == 0);
    CHECK_ST(gw_verbs_port_select(root, "mlx5_1", 2, -1, &p, why, sizeof(why)), GW_ERR_NOT_FOUND);
    fprintf(stderr, "gid 2: %s\n", why);
    CHECK(strstr(why, "GPUWIRE_IB_GID_INDEX=2") != NULL);
    /* InfiniBand without a LID is not usable: the reason says why */
    CHECK_ST(gw_verbs_port_select(root, "mlx4_0", -1, -1, &p, why, sizeof(why)), GW_ERR_NOT_FOUND);
    CHECK(strstr(why, "LID") != NULL);
    make_ib("mlx4_0", 1, "4: ACTIVE", "0x12");
    REQUIRE_OK(gw_verbs_port_select(root, "mlx4_0", -1, -1, &p, why, sizeof(why)));
    CHECK(p.link_layer == GW_VERBS_LL_IB && p.lid == 0x12 && p.ngids == 1);
    /* every candidate listed when none is usable */
    make_roce("mlx5_1", 1, "1: DOWN", "0a00:0001", 1);
    make_roce("mlx5_2", 1, "1: DOWN", "0a00:0002", 0);
    make_ib("mlx4_0", 1, "1: DOWN", "0x12");
    CHECK_ST(gw_verbs_port_select(root, "", -1, -1, &p, why, sizeof(why)), GW_ERR_UNAVAILABLE);
    fprintf(stderr, "none: %s\n", why);
    CHECK(strstr(why, "mlx4_0:1") && strstr(why, "mlx5_0:1") && strstr(why, "mlx5_2:1"));
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    CHECK(system(cmd) == 0);
}

static gw_verbs_gid_t gid(int idx, const char *s)
{
    gw_verbs_gid_t g;
    memset(&g, 0, sizeof(g));
    g.index = (uint8_t)idx;
    g.type = GW_GID_ROCE_V2;
    unsigned v[8];
    sscanf(s, "%x:%x:%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    for (int i = 0; i < 8; i++) {
        g.raw[2 * i] = (uint8_t)(v[i] >> 8);
        g.raw[2 * i + 1] = (uint8_t)v[i];
    }
    g.v4 = g.raw[10] == 0xff && g.raw[11] == 0xff && !g.raw[0];
    g.link_local = g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80;
    return g;
}

static void test_pair(void)
{
    gw_verbs_gid_t a[3] = {gid(1, "0:0:0:0:0:ffff:c0a8:4e01"), gid(3, "2001:db8:0:0:0:0:0:1"),
                           gid(0, "fe80:0:0:0:1:2:3:4")};
    gw_verbs_gid_t b[2] = {gid(2, "2001:db8:0:0:0:0:0:2"), gid(0, "fe80:0:0:0:5:6:7:8")};
    int oi, pi;
    char why[256];
    /* no IPv4 on the peer: global IPv6 beats link-local */
    REQUIRE(gw_verbs_gid_pair(a, 3, b, 2, &oi, &pi, why, sizeof(why)) == 0);
    CHECK(oi == 1 && pi == 0);
    /* IPv4 on both: taken */
    gw_verbs_gid_t c[2] = {gid(0, "fe80:0:0:0:5:6:7:8"), gid(4, "0:0:0:0:0:ffff:c0a8:4e02")};
    REQUIRE(gw_verbs_gid_pair(a, 3, c, 2, &oi, &pi, why, sizeof(why)) == 0);
    CHECK(oi == 0 && pi == 1);
    /* only link-local in common: used (on-link peers only) */
    REQUIRE(gw_verbs_gid_pair(a + 2, 1, c, 1, &oi, &pi, why, sizeof(why)) == 0);
    /* nothing in common: both sides named */
    CHECK(gw_verbs_gid_pair(a, 1, b, 1, &oi, &pi, why, sizeof(why)) != 0);
    fprintf(stderr, "pair: %s\n", why);
    CHECK(strstr(why, "local 1:IPv4") && strstr(why, "peer 2:IPv6"));
}

static void test_blob(void)
{
    gw_verbs_addr_t a, b;
    memset(&a, 0, sizeof(a));
    a.version = GW_VERBS_ADDR_VERSION;
    a.link_layer = GW_VERBS_LL_ETH;
    a.port = 1;
    a.mtu = 3;
    a.nqps = 2;
    a.qpn[0] = 0x11;
    a.qpn[1] = 0x12;
    a.psn[0] = 0xabcdef;
    a.ngids = 1;
    a.gids[0] = gid(1, "0:0:0:0:0:ffff:c0a8:4d01");
    a.max_msg = 1u << 30;
    a.features = GW_VERBS_FEAT_WRITE_RDV;
    snprintf(a.dev, sizeof(a.dev), "rxe0");
    uint8_t buf[512];
    size_t n = gw_verbs_addr_pack(&a, buf, sizeof(buf));
    REQUIRE(n > 0);
    CHECK(gw_verbs_addr_pack(&a, buf, n - 1) == 0);
    REQUIRE_OK(gw_verbs_addr_unpack(&b, buf, n));
    CHECK(b.nqps == 2 && b.qpn[1] == 0x12 && b.psn[0] == 0xabcdef && b.mtu == 3);
    CHECK(b.ngids == 1 && b.gids[0].index == 1 && b.gids[0].v4);
    CHECK(!strcmp(b.dev, "rxe0") && b.max_msg == (1u << 30));
    CHECK(b.features == GW_VERBS_FEAT_WRITE_RDV);
    /* a blob without the features word (a peer built before it) decodes
     * with none; later bytes after it are ignored */
    for (size_t k = n - 4; k < n; k++) {
        REQUIRE_OK(gw_verbs_addr_unpack(&b, buf, k));
        CHECK(b.features == 0 && b.nqps == 2);
    }
    buf[n] = 0x5a;
    REQUIRE_OK(gw_verbs_addr_unpack(&b, buf, n + 1));
    CHECK(b.features == GW_VERBS_FEAT_WRITE_RDV);
    /* truncations inside the fixed part and bad fields are refused, never
     * read past the end */
    for (size_t k = 0; k < n - 4; k++)
        CHECK(gw_verbs_addr_unpack(&b, buf, k) != GW_OK);
    buf[0] = 9;
    CHECK_ST(gw_verbs_addr_unpack(&b, buf, n), GW_ERR_PROTOCOL);
    buf[0] = GW_VERBS_ADDR_VERSION;
    buf[6] = 0; /* no QPs */
    CHECK_ST(gw_verbs_addr_unpack(&b, buf, n), GW_ERR_PROTOCOL);
}

static void test_loader(void)
{
    /* absent library: NULL with the reason (in a child: the loader runs once per process) */
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("GPUWIRE_IB_LIB", "/nonexistent/libibverbs.so.1", 1);
        char why[512] = "";
        const gw_ibv_t *t = gw_ibv_get(why, sizeof(why));
        fprintf(stderr, "absent: %s\n", why);
        _exit(t == NULL && strstr(why, "/nonexistent/libibverbs.so.1") && strstr(why, "GPUWIRE_IB_LIB") ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* present (libibverbs1 installed): loads; listing devices prints nothing
     * on stderr even when libibverbs complains about providers */
    char why[512] = "";
    const gw_ibv_t *t = gw_ibv_get(why, sizeof(why));
    if (!t) {
        fprintf(stderr, "libibverbs not loadable here (%s): loader presence check skipped\n", why);
        return;
    }
    CHECK(t->get_device_list && t->open_device && t->modify_qp && t->wc_status_str);
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(pfd[1], 2);
    setenv("RDMAV_DRIVERS", "gw_no_such_provider", 1); /* makes libibverbs warn */
    int n = -1;
    struct ibv_device **l = gw_ibv_device_list(t, &n);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(pfd[1]);
    char out[2048] = "";
    ssize_t got = read(pfd[0], out, sizeof(out) - 1);
    close(pfd[0]);
    if (got > 0)
        out[got] = '\0';
    fprintf(stderr, "device list: %d devices; stderr during listing: \"%s\"; quieted: \"%s\"\n", n,
            got > 0 ? out : "", t->init_noise);
    CHECK(got <= 0);
    if (l)
        t->free_device_list(l);
}

int main(void)
{
    test_select();
    test_pair();
    test_blob();
    test_loader();
    return gwt_done("verbs_select");
}
