/* SPDX-License-Identifier: Apache-2.0 */
/* test_cuda_loader - the CUDA driver loader: absent vs broken vs working. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

int main(int argc, char **argv)
{
    char why[256] = "";
    if (argc > 1 && strcmp(argv[1], "--bogus") == 0) {
        /* child mode: GPUWIRE_CUDA_LIB points at a library that is not CUDA */
        const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
        CHECK(cu == NULL);
        CHECK(strstr(why, "GPUWIRE_CUDA_LIB") != NULL || strstr(why, "not a CUDA") != NULL);
        printf("bogus library reason: %s\n", why);
        return gwt_done("test_cuda_loader(bogus)");
    }
    /* a library that exists but is not CUDA: "broken", named in the reason */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "GPUWIRE_CUDA_LIB=libc.so.6 %s --bogus", argv[0]);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof(cmd), "GPUWIRE_CUDA_LIB=/nonexistent/libcuda.so.1 %s --bogus", argv[0]);
    CHECK(system(cmd) == 0);

    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    const gw_cuda_t *again = gw_cuda_get(NULL, 0);
    CHECK(cu == again);
    if (!cu) {
        CHECK(why[0] != '\0');
        printf("CUDA unavailable: %s\n", why);
        if (gwt_failures)
            return gwt_done("test_cuda_loader");
        SKIP("no CUDA driver here (%s); absent-driver behaviour checked", why);
    }
    CHECK(cu->driver_version >= 11000);
    CHECK(cu->device_count >= 1);
    CHECK(cu->cuMemAlloc != NULL && cu->cuPointerGetAttributes != NULL);
    for (int d = 0; d < cu->device_count; d++) {
        char bus[32], name[128] = "";
        gw_cuda_pci_bus_id(d, bus, sizeof(bus));
        CUdevice dev;
        CHECK(cu->cuDeviceGet(&dev, d) == CUDA_SUCCESS);
        cu->cuDeviceGetName(name, sizeof(name), dev);
        CHECK(strlen(bus) >= 7);
        printf("device %d: %s pci %s\n", d, name, bus);
    }
    printf("driver %d, %d device(s), dma-buf call %s, flush call %s, VMM %s\n", cu->driver_version,
           cu->device_count, cu->cuMemGetHandleForAddressRange ? "yes" : "no",
           cu->cuFlushGPUDirectRDMAWrites ? "yes" : "no", cu->cuMemCreate ? "yes" : "no");
    return gwt_done("test_cuda_loader");
}
