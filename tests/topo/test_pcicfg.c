/* SPDX-License-Identifier: Apache-2.0 */
/* test_pcicfg.c - config-space parsing (PCIe port type, ACS) and the sysfs
 * readers on synthetic input: short, looping, all-ones, garbage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h"
#include "harness.h"
#include "topo/topo.h"

static uint8_t cfg[4096];

static void make(int type, int acs_at, uint16_t ctrl)
{
    memset(cfg, 0, sizeof(cfg));
    gw_put_u16(cfg + 0, 0x1000);
    cfg[0x06] = 0x10;
    cfg[0x34] = 0x50;
    /* a power-management capability first, then PCIe */
    cfg[0x50] = 0x01;
    cfg[0x51] = 0x60;
    cfg[0x60] = 0x10;
    cfg[0x61] = 0x00;
    gw_put_u16(cfg + 0x62, (uint16_t)(0x2 | (type << 4)));
    if (acs_at) {
        gw_put_u32(cfg + 0x100, 0x0001u | (1u << 16) | ((uint32_t)acs_at << 20)); /* AER -> ACS */
        gw_put_u32(cfg + acs_at, 0x000du | (1u << 16));
        gw_put_u16(cfg + acs_at + 4, 0x5f);
        gw_put_u16(cfg + acs_at + 6, ctrl);
    }
}

int main(void)
{
    uint16_t caps, ctrl;
    int off;
    char why[256];

    make(GW_PCIE_DOWNSTREAM, 0x148, 0x0015);
    CHECK(gw_pcicfg_port_type(cfg, 4096) == GW_PCIE_DOWNSTREAM);
    CHECK(gw_pcicfg_port_type(cfg, 64) == GW_PCIE_TYPE_UNKNOWN); /* non-root view */
    CHECK(gw_pcicfg_port_type(cfg, 0x62) == GW_PCIE_TYPE_UNKNOWN); /* list runs past the end */
    CHECK(gw_pcicfg_acs(cfg, 4096, &caps, &ctrl, &off, why, sizeof(why)) == 1);
    CHECK(off == 0x148 && caps == 0x5f && ctrl == 0x0015);
    CHECK((ctrl & GW_ACS_P2P_BLOCKING) == GW_ACS_RR);
    CHECK(gw_pcicfg_acs(cfg, 64, &caps, &ctrl, &off, why, sizeof(why)) == -1);
    CHECK(strstr(why, "64 bytes"));
    CHECK(gw_pcicfg_acs(cfg, 256, &caps, &ctrl, &off, why, sizeof(why)) == 0);
    CHECK(strstr(why, "conventional"));

    make(GW_PCIE_ROOT_PORT, 0, 0);
    CHECK(gw_pcicfg_port_type(cfg, 4096) == GW_PCIE_ROOT_PORT);
    CHECK(gw_pcicfg_acs(cfg, 4096, &caps, &ctrl, &off, why, sizeof(why)) == 0); /* empty ext space */
    /* no capability list bit */
    cfg[0x06] = 0;
    CHECK(gw_pcicfg_port_type(cfg, 4096) == GW_PCIE_TYPE_UNKNOWN);
    /* capability list that loops forever ends */
    make(GW_PCIE_UPSTREAM, 0, 0);
    cfg[0x61] = 0x50;
    cfg[0x60] = 0x05;
    CHECK(gw_pcicfg_port_type(cfg, 4096) == GW_PCIE_TYPE_UNKNOWN);
    /* extended list that loops: 0x100 -> 0x100 */
    gw_put_u32(cfg + 0x100, 0x0001u | (0x100u << 20));
    CHECK(gw_pcicfg_acs(cfg, 4096, &caps, &ctrl, &off, why, sizeof(why)) == 0);
    /* all-ones (device gone) */
    memset(cfg + 0x100, 0xff, 4);
    CHECK(gw_pcicfg_acs(cfg, 4096, &caps, &ctrl, &off, why, sizeof(why)) == -1);
    CHECK(strstr(why, "all-ones"));
    /* an ACS header near the end of what was read */
    make(GW_PCIE_DOWNSTREAM, 0, 0);
    gw_put_u32(cfg + 0x100, 0x000du);
    CHECK(gw_pcicfg_acs(cfg, 0x104, &caps, &ctrl, &off, why, sizeof(why)) == -1);

    /* BDF syntax */
    CHECK(gw_is_bdf("0000:07:00.0"));
    CHECK(gw_is_bdf("10000:e1:00.7")); /* VMD domain */
    CHECK(!gw_is_bdf("0000:07:00.8"));
    CHECK(!gw_is_bdf("07:00.0"));
    CHECK(!gw_is_bdf("pci0000:00"));
    CHECK(!gw_is_bdf("0000:07:00.0x"));

    /* sysfs readers */
    char dir[] = "/tmp/gwtopo-read-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[512], buf[64];
    long v;
    snprintf(path, sizeof(path), "%s/num", dir);
    FILE *f = fopen(path, "w");
    fputs("4: ACTIVE\n", f);
    fclose(f);
    CHECK(gw_sysfs_read_long(dir, "num", &v, why, sizeof(why)) == 0 && v == 4);
    CHECK(gw_sysfs_read(dir, "/num", buf, sizeof(buf), why, sizeof(why)) == 9 && !strcmp(buf, "4: ACTIVE"));
    snprintf(path, sizeof(path), "%s/hex", dir);
    f = fopen(path, "w");
    fputs("0x10de\n", f);
    fclose(f);
    CHECK(gw_sysfs_read_long(dir, "hex", &v, why, sizeof(why)) == 0 && v == 0x10de);
    snprintf(path, sizeof(path), "%s/bad", dir);
    f = fopen(path, "w");
    fputs("12abc", f);
    fclose(f);
    CHECK(gw_sysfs_read_long(dir, "bad", &v, why, sizeof(why)) == -1 && strstr(why, "not a number"));
    snprintf(path, sizeof(path), "%s/bin", dir);
    f = fopen(path, "w");
    fwrite("1\0\0\0", 1, 4, f);
    fclose(f);
    CHECK(gw_sysfs_read(dir, "bin", buf, sizeof(buf), why, sizeof(why)) == -1 && strstr(why, "binary"));
    CHECK(gw_sysfs_read(dir, "missing", buf, sizeof(buf), why, sizeof(why)) == -1 && strstr(why, "No such file"));
    char out[256];
    snprintf(path, sizeof(path), "%s/escape", dir);
    CHECK(symlink("/etc", path) == 0);
    CHECK(gw_sysfs_resolve(dir, "escape", out, sizeof(out), why, sizeof(why)) == -1 && strstr(why, "outside"));
    snprintf(path, sizeof(path), "%s/inside", dir);
    CHECK(symlink("hex", path) == 0);
    CHECK(gw_sysfs_resolve(dir, "inside", out, sizeof(out), why, sizeof(why)) == 0 && !strcmp(out, "/hex"));
    CHECK(gw_sysfs_resolve("/", "etc", out, sizeof(out), why, sizeof(why)) == 0 && !strcmp(out, "/etc"));
    const char *names[] = {"num", "hex", "bad", "bin", "escape", "inside"};
    for (size_t i = 0; i < GW_ARRAY_SIZE(names); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return gwt_done("topo_pcicfg");
}
