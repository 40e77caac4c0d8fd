/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_props.c - the NCCL plugin's device properties through every interface
 * version (v8 .. v12), on the CPU.
 *
 *   nccl_props PLUGIN.so [--fixture virtio|virtual] [--expect-pci BDF|none]
 *              [--expect-ptr host|cuda] [--expect-gdr-level LEVEL|unset]
 *              [--preset-gdr-level LEVEL] [--expect-ndev N] [--expect-name NAME]
 *
 * --fixture builds a small sysfs tree in a temporary directory and points
 * GPUWIRE_SYSFS_ROOT at it, with GPUWIRE_NCCL_IFNAME=lo (an interface every
 * host has, so the handle still gets an address):
 *   virtio   class/net/lo/device -> devices/pci0000:00/0000:00:03.0/virtio2,
 *            whose "subsystem" is the virtio bus and whose parent's is pci:
 *            the plugin must report the PCI function, 0000:00:03.0, as NCCL
 *            ignores a path that is not a PCI device;
 *   virtual  class/net/lo/device -> devices/virtual/net/lo: no PCI function
 *            above it, so no path.
 * Then init through v12, and getProperties through v12, v11, v10, v9 and v8
 * must all report the same name, PCI path, pointer types and speed; v12's
 * railId/planeId are "not known" and its device list names the device.
 * Without --fixture the tree is GPUWIRE_SYSFS_ROOT's (ctest points it at a
 * machine of tests/topo/mkfixture.sh, e.g. an EFA instance).
 * --expect-ndev, --expect-name: how many devices, and device 0's name.
 * --expect-ptr: NCCL_PTR_CUDA advertised or not (the GPU-buffer choice);
 * --expect-gdr-level: NCCL_NET_GDR_LEVEL in the environment after init
 * (set by the plugin, kept from --preset-gdr-level, or left unset).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "../../plugin/nccl/nccl_net_abi.h"

static char g_root[PATH_MAX];

static void logger(ncclDebugLogLevel lvl, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    (void)flags;
    fprintf(stderr, "%s %s:%d %s\n", lvl == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, buf);
}

static void mkdirs(const char *rel)
{
    char p[PATH_MAX + 256];
    snprintf(p, sizeof(p), "%s/%s", g_root, rel);
    for (char *s = p + strlen(g_root) + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    REQUIRE(mkdir(p, 0755) == 0 || access(p, F_OK) == 0);
}

static void link_rel(const char *target, const char *rel)
{
    char p[PATH_MAX + 256];
    snprintf(p, sizeof(p), "%s/%s", g_root, rel);
    if (symlink(target, p) != 0) {
        fprintf(stderr, "symlink(%s, %s) failed\n", target, p);
        REQUIRE(0);
    }
}

static void build_fixture(const char *kind)
{
    snprintf(g_root, sizeof(g_root), "%s/gw_nccl_props_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(g_root) != NULL);
    mkdirs("bus/pci");
    mkdirs("bus/virtio");
    mkdirs("class/net/lo");
    if (strcmp(kind, "virtio") == 0) {
        mkdirs("devices/pci0000:00/0000:00:03.0/virtio2");
        link_rel("../../../bus/pci", "devices/pci0000:00/0000:00:03.0/subsystem");
        link_rel("../../../../bus/virtio", "devices/pci0000:00/0000:00:03.0/virtio2/subsystem");
        link_rel("../../../devices/pci0000:00/0000:00:03.0/virtio2", "class/net/lo/device");
    } else {
        mkdirs("devices/virtual/net/lo");
        link_rel("../../../devices/virtual/net/lo", "class/net/lo/device");
    }
    setenv("GPUWIRE_SYSFS_ROOT", g_root, 1);
    setenv("GPUWIRE_NCCL_IFNAME", "lo", 1);
}

int main(int argc, char **argv)
{
    const char *fixture = NULL, *want_pci = NULL, *want_ptr = NULL, *want_level = NULL, *preset = NULL;
    const char *want_name = NULL;
    int want_ndev = -1, want_speed = -1;
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLUGIN.so [--fixture virtio|virtual] [--expect-pci BDF|none] "
                "[--expect-ptr host|cuda] [--expect-gdr-level LEVEL|unset] [--preset-gdr-level LEVEL] [--expect-speed MBPS]\n", argv[0]);
        return 2;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--fixture"))
            fixture = argv[i + 1];
        else if (!strcmp(argv[i], "--expect-pci"))
            want_pci = argv[i + 1];
        else if (!strcmp(argv[i], "--expect-ptr"))
            want_ptr = argv[i + 1];
        else if (!strcmp(argv[i], "--expect-gdr-level"))
            want_level = argv[i + 1];
        else if (!strcmp(argv[i], "--preset-gdr-level"))
            preset = argv[i + 1];
        else if (!strcmp(argv[i], "--expect-ndev"))
            want_ndev = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect-speed"))
            want_speed = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect-name"))
            want_name = argv[i + 1];
        else {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (fixture)
        build_fixture(fixture);
    else if (getenv("GPUWIRE_SYSFS_ROOT"))
        snprintf(g_root, sizeof(g_root), "%s", getenv("GPUWIRE_SYSFS_ROOT"));
    if (preset)
        setenv("NCCL_NET_GDR_LEVEL", preset, 1);
    else
        unsetenv("NCCL_NET_GDR_LEVEL");

    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen(%s) failed: %s\n", argv[1], dlerror());
        return 1;
    }
    const ncclNet_v12_t *n12 = dlsym(lib, "ncclNetPlugin_v12");
    const ncclNet_v11_t *n11 = dlsym(lib, "ncclNetPlugin_v11");
    const ncclNet_v10_t *n10 = dlsym(lib, "ncclNetPlugin_v10");
    const ncclNet_v9_t *n9 = dlsym(lib, "ncclNetPlugin_v9");
    const ncclNet_v8_t *n8 = dlsym(lib, "ncclNetPlugin_v8");
    REQUIRE(n12 && n11 && n10 && n9 && n8);
    CHECK(strcmp(n12->name, "gpuwire") == 0);
    CHECK(n12->getDeviceMr == NULL && n12->irecvConsumed == NULL && n12->makeVDevice == NULL &&
          n12->setNetAttr == NULL && n12->finalize != NULL);

    void *ctx = NULL;
    ncclNetCommConfig_t cfg = {.trafficClass = -1};
    REQUIRE(n12->init(&ctx, 0x5eed, &cfg, logger, NULL) == ncclSuccess);
    int ndev = 0;
    REQUIRE(n12->devices(&ndev) == ncclSuccess && ndev >= 1);

    ncclNetProperties_v12_t p12;
    ncclNetProperties_v11_t p11;
    ncclNetProperties_v10_t p10;
    ncclNetProperties_v9_t p9;
    ncclNetProperties_v8_t p8;
    memset(&p12, 0x5a, sizeof(p12));
    REQUIRE(n12->getProperties(0, &p12) == ncclSuccess);
    REQUIRE(n11->getProperties(0, &p11) == ncclSuccess);
    REQUIRE(n10->getProperties(0, &p10) == ncclSuccess);
    REQUIRE(n9->getProperties(0, &p9) == ncclSuccess);
    REQUIRE(n8->getProperties(0, &p8) == ncclSuccess);
    CHECK(n12->getProperties(ndev, &p12) == ncclInvalidArgument);
    REQUIRE(n12->getProperties(0, &p12) == ncclSuccess);
    fprintf(stderr, "dev 0 %s: pciPath %s, ptrSupport 0x%x, speed %d, railId %d, planeId %d, vProps %d [%d]\n",
            p12.name, p12.pciPath ? p12.pciPath : "(null)", p12.ptrSupport, p12.speed, p12.railId, p12.planeId,
            p12.vProps.ndevs, p12.vProps.devs[0]);

    if (want_ndev >= 0)
        CHECK(ndev == want_ndev);
    if (want_speed >= 0)
        CHECK(p12.speed == want_speed);
    if (want_name)
        CHECK(p12.name && strcmp(p12.name, want_name) == 0);
    /* v12's own fields */
    CHECK(p12.railId == NCCL_NET_ID_UNDEF && p12.planeId == NCCL_NET_ID_UNDEF);
    CHECK(p12.vProps.ndevs == 1 && p12.vProps.devs[0] == 0);
    CHECK(p12.maxMultiRequestSize == 1 && p12.maxRecvs >= 1 && p12.netDeviceType == NCCL_NET_DEVICE_HOST);
    /* every version says the same */
#define SAME(p)                                                                                                \
    CHECK(p.name == p12.name && p.pciPath == p12.pciPath && p.ptrSupport == p12.ptrSupport &&                 \
          p.speed == p12.speed && p.port == p12.port && p.maxRecvs == p12.maxRecvs)
    SAME(p11);
    SAME(p10);
    SAME(p9);
    SAME(p8);
    CHECK(p11.vProps.ndevs == 1 && p11.vProps.devs[0] == 0 && p11.maxMultiRequestSize == 1);
    CHECK(p9.vProps.ndevs == 1 && p9.maxP2pBytes == p12.maxP2pBytes && p10.maxCollBytes == p12.maxCollBytes);

    if (want_pci && strcmp(want_pci, "none") == 0) {
        CHECK(p12.pciPath == NULL);
    } else if (want_pci) {
        const char *slash = p12.pciPath ? strrchr(p12.pciPath, '/') : NULL;
        CHECK(slash && strcmp(slash + 1, want_pci) == 0);
        /* the reported path is the PCI function itself, inside the tree read */
        char sub[PATH_MAX + 16], real_root[PATH_MAX];
        CHECK(p12.pciPath && realpath(g_root, real_root) && strncmp(p12.pciPath, real_root, strlen(real_root)) == 0);
        snprintf(sub, sizeof(sub), "%s/subsystem", p12.pciPath ? p12.pciPath : "");
        char target[PATH_MAX];
        char *t = realpath(sub, target);
        CHECK(t && strcmp(strrchr(t, '/'), "/pci") == 0);
    }
    if (want_ptr) {
        int cuda = (p12.ptrSupport & NCCL_PTR_CUDA) != 0;
        CHECK(p12.ptrSupport & NCCL_PTR_HOST);
        CHECK(cuda == (strcmp(want_ptr, "cuda") == 0));
        CHECK((p12.ptrSupport & NCCL_PTR_DMABUF) == 0);
    }
    if (want_level) {
        const char *lvl = getenv("NCCL_NET_GDR_LEVEL");
        fprintf(stderr, "NCCL_NET_GDR_LEVEL after init: %s\n", lvl ? lvl : "(unset)");
        if (strcmp(want_level, "unset") == 0)
            CHECK(lvl == NULL);
        else
            CHECK(lvl && strcmp(lvl, want_level) == 0);
    }
    CHECK(n12->finalize(ctx) == ncclSuccess);
    if (fixture) {
        char cmd[PATH_MAX + 32];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_root);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_root);
    }
    return gwt_done("nccl_props");
}
