/* cuda_mem.c - memory type detection.  Placeholder until the CUDA loader
 * lands: every pointer is host memory. */
#include "mem/mem.h"

gw_status_t gw_mem_detect(gw_core_t *c, gw_mem_t *m)
{
    (void)c;
    m->type = GW_MEM_HOST;
    m->cuda_device = -1;
    m->pci_bus_id[0] = '\0';
    return GW_OK;
}
