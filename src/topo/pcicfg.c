/* SPDX-License-Identifier: Apache-2.0 */
/* pcicfg.c - the two things gpuwire reads from PCI config space: the PCIe
 * port type (to tell switch ports from root ports) and the ACS control
 * register (which can force peer-to-peer traffic up to the root complex). */
#include <stdio.h>

#include "core/util.h"
#include "topo/topo.h"

#define CFG_STATUS 0x06
#define CFG_STATUS_CAPLIST 0x10
#define CFG_CAP_PTR 0x34
#define CAP_ID_PCIE 0x10
#define ECAP_START 0x100
#define ECAP_ID_ACS 0x000d

int gw_pcicfg_port_type(const uint8_t *cfg, long len)
{
    if (len < 0x40)
        return GW_PCIE_TYPE_UNKNOWN;
    if (!(gw_get_u16(cfg + CFG_STATUS) & CFG_STATUS_CAPLIST))
        return GW_PCIE_TYPE_UNKNOWN;
    unsigned off = cfg[CFG_CAP_PTR] & 0xfc;
    for (int guard = 0; off >= 0x40 && guard < 48; guard++) {
        if ((long)off + 4 > len)
            return GW_PCIE_TYPE_UNKNOWN; /* the list runs past what we could read */
        if (cfg[off] == CAP_ID_PCIE)
            return (gw_get_u16(cfg + off + 2) >> 4) & 0xf;
        off = cfg[off + 1] & 0xfc;
    }
    return GW_PCIE_TYPE_UNKNOWN;
}

int gw_pcicfg_acs(const uint8_t *cfg, long len, uint16_t *caps, uint16_t *ctrl, int *offset,
                  char *why, size_t whylen)
{
    if (len < 0x100) {
        if (why && whylen)
            snprintf(why, whylen,
                     "only %ld bytes of config space readable (beyond 64 bytes needs root)", len);
        return -1;
    }
    if (len < ECAP_START + 4) {
        if (why && whylen)
            snprintf(why, whylen, "no extended config space (conventional PCI, %ld bytes)", len);
        return 0;
    }
    unsigned off = ECAP_START;
    for (int guard = 0; guard < 256; guard++) {
        if ((long)off + 8 > len) {
            if (why && whylen)
                snprintf(why, whylen, "extended capability at 0x%x runs past the %ld readable bytes",
                         off, len);
            return -1;
        }
        uint32_t hdr = gw_get_u32(cfg + off);
        if (hdr == 0xffffffffu) {
            if (why && whylen)
                snprintf(why, whylen, "extended config space reads as all-ones (device gone or blocked)");
            return -1;
        }
        if (hdr == 0)
            break;
        if ((hdr & 0xffff) == ECAP_ID_ACS) {
            *caps = gw_get_u16(cfg + off + 4);
            *ctrl = gw_get_u16(cfg + off + 6);
            *offset = (int)off;
            return 1;
        }
        unsigned next = (hdr >> 20) & 0xffc;
        if (next < ECAP_START)
            break;
        off = next;
    }
    if (why && whylen)
        snprintf(why, whylen, "no ACS capability");
    return 0;
}
