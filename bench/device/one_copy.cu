/* SPDX-License-Identifier: Apache-2.0 */
/* one_copy.cu - one small copy GPU 0 -> GPU 1 (peer access; GPU 0 alone
 * where there is one), host wall time from the call to the event's
 * completion seen by polling (cudaEventQuery): one copy-engine copy
 * (cudaMemcpyAsync; "ce post" is the call alone) against the library's
 * descriptor kernel (gw_batch_copy, included from src/cuda/copy_kernel.cu)
 * launched for one descriptor, read from pinned memory and from GPU
 * memory; and what an event's create and destroy cost.  Medians of 1900.
 * It says which way a batch of one entry should go (intra_batch.c).
 *   nvcc -O3 -arch=sm_90 -o one_copy bench/device/one_copy.cu && ./one_copy */
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <chrono>
#include <cuda_runtime.h>
#include "../../src/cuda/copy_kernel.cu"
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)
static double now() { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
    int nd; CK(cudaGetDeviceCount(&nd)); int peer = nd > 1;
    char *src, *dst; CK(cudaSetDevice(peer)); CK(cudaMalloc(&dst, 1 << 20)); if (peer) cudaDeviceEnablePeerAccess(0, 0);
    CK(cudaSetDevice(0)); CK(cudaMalloc(&src, 1 << 20)); if (peer) cudaDeviceEnablePeerAccess(1, 0);
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t ev; CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    gw_copy_desc *d; CK(cudaHostAlloc(&d, 64, 0));
    gw_copy_desc *dd; CK(cudaMalloc(&dd, 64));
    size_t sizes[] = {8, 4096, 65536};
    printf("%8s %14s %14s %14s %14s %14s\n", "bytes", "ce post", "ce total", "kern(pin) tot", "kern(dev) tot", "evcreate+destroy");
    for (size_t n : sizes) {
        std::vector<double> t[5];
        for (int r = 0; r < 2000; r++) {
            double a = now(); CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s)); double b = now(); CK(cudaEventRecord(ev, s));
            while (cudaEventQuery(ev) == cudaErrorNotReady) {} double c = now();
            if (r > 100) { t[0].push_back(b - a); t[1].push_back(c - a); }
            d[0].src = (unsigned long long)src; d[0].dst = (unsigned long long)dst; d[0].len = n;
            a = now(); gw_batch_copy<<<1, 256, 0, s>>>(d, 1); CK(cudaEventRecord(ev, s));
            while (cudaEventQuery(ev) == cudaErrorNotReady) {} c = now();
            if (r > 100) t[2].push_back(c - a);
            if (r == 0) CK(cudaMemcpy(dd, d, 64, cudaMemcpyHostToDevice));
            a = now(); gw_batch_copy<<<1, 256, 0, s>>>(dd, 1); CK(cudaEventRecord(ev, s));
            while (cudaEventQuery(ev) == cudaErrorNotReady) {} c = now();
            if (r > 100) t[3].push_back(c - a);
            a = now(); cudaEvent_t e2; CK(cudaEventCreateWithFlags(&e2, cudaEventDisableTiming)); CK(cudaEventDestroy(e2)); c = now();
            if (r > 100) t[4].push_back(c - a);
        }
        printf("%8zu", n);
        for (auto &v : t) { std::sort(v.begin(), v.end()); printf(" %14.2f", v[v.size() / 2]); }
        printf("\n");
    }
    return 0;
}
