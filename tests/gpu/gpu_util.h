/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_util.h - helpers shared by the GPU tests: skip without a GPU, VMM
 * allocations exportable as POSIX fds. */
#ifndef GW_TEST_GPU_UTIL_H
#define GW_TEST_GPU_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

#define CU_CHECK(call)                                                                         \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS) {                                                              \
            char eb_[160];                                                                     \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,               \
                    gw_cuda_strerror(r_, eb_, sizeof(eb_)));                                   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* The loaded driver with at least `need` GPUs, else exit 77 with the reason. */
static inline const gw_cuda_t *gpu_require(int need)
{
    char why[256];
    const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
    if (!cu)
        SKIP("no usable CUDA driver: %s", why);
    if (cu->device_count < need)
        SKIP("needs %d GPUs, found %d", need, cu->device_count);
    return cu;
}

/* Maps `pieces` separate VMM allocations of `each` bytes (rounded to the
 * granularity) back to back on device dev; returns the base address. */
static inline CUdeviceptr gpu_vmm_alloc(const gw_cuda_t *cu, int dev, size_t each, int pieces,
                                        size_t *total, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CU_CHECK(cu->cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    each = (each + gran - 1) / gran * gran;
    CUdeviceptr va = 0;
    CU_CHECK(cu->cuMemAddressReserve(&va, each * (size_t)pieces, 0, 0, 0));
    for (int i = 0; i < pieces; i++) {
        CU_CHECK(cu->cuMemCreate(&h[i], each, &prop, 0));
        CU_CHECK(cu->cuMemMap(va + each * (size_t)i, each, 0, h[i], 0));
    }
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_CHECK(cu->cuMemSetAccess(va, each * (size_t)pieces, &acc, 1));
    *total = each * (size_t)pieces;
    return va;
}

static inline void gpu_vmm_free(const gw_cuda_t *cu, CUdeviceptr va, size_t total, int pieces,
                                CUmemGenericAllocationHandle *h)
{
    cu->cuMemUnmap(va, total);
    for (int i = 0; i < pieces; i++)
        cu->cuMemRelease(h[i]);
    cu->cuMemAddressFree(va, total);
}

/* For programs that fork: CUDA must not be initialised before fork(), so
 * the "is there a usable driver with `need` GPUs" question is asked in a
 * throw-away child.  Exits 77 with the reason when not. */
#include <sys/wait.h>
#include <unistd.h>
static inline void gpu_require_before_fork(int need)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        char why[256] = "";
        const gw_cuda_t *cu = gw_cuda_get(why, sizeof(why));
        if (cu && cu->device_count < need)
            snprintf(why, sizeof(why), "needs %d GPUs, found %d", need, cu->device_count);
        else if (cu)
            why[0] = '\0';
        ssize_t w = write(fds[1], why, strlen(why) + 1);
        (void)w;
        _exit(0);
    }
    close(fds[1]);
    char why[256] = "";
    ssize_t n = read(fds[0], why, sizeof(why) - 1);
    close(fds[0]);
    waitpid(pid, NULL, 0);
    if (n <= 0)
        SKIP("CUDA probe child died");
    why[sizeof(why) - 1] = '\0';
    if (why[0])
        SKIP("GPU memory needs CUDA: %s", why);
}

#endif
