/* SPDX-License-Identifier: Apache-2.0 */
// check_forms.cu - where the cost of checking page index arrays on the GPU
// goes: the library's page kernel (copy) beside the same copy launched
// cooperatively, behind a grid barrier alone (bar+copy, and with backoff,
// cooperative groups' grid sync, or 264 blocks), behind a check with no
// barrier (chk+copy: the reads alone), the library's fused and two-launch
// forms, the two-launch form with programmatic dependent launch, a per-page
// check with no barrier (lenient: not the library's rule, for scale), and
// every block checking every entry (rchk: gw_page_rcheck's approach).
// 32 MiB of random pages GPU 0 -> GPU 1, CUDA events, medians (us), and
// each form's ratio to one copy-engine copy of the same bytes.
//   nvcc -O3 -arch=sm_90 -o cf bench/device/check_forms.cu && ./cf 32 30
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1);} } while (0)
#include "../../src/cuda/copy_kernel.cu"
static unsigned cur_grid(unsigned long long nitems, unsigned long long len, unsigned *g_out, unsigned *per_out) {
    unsigned g = 32; while (g < 256 && (unsigned long long)g * 2 * 16 * 2 <= len) g *= 2;
    unsigned ipb = 256 / g; unsigned long long per = (nitems + 1023) / 1024;
    per = per < ipb ? ipb : per > 64 ? 64 : (per + ipb - 1) / ipb * ipb;
    unsigned long long nb = (nitems + per - 1) / per; *g_out = g; *per_out = (unsigned)per;
    return nb < 8192 ? (unsigned)nb : 8192;
}
// barrier then copy, no check
extern "C" __global__ void x_bar(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per,
    unsigned long long *bar, unsigned long long target) {
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence(); atomicAdd(bar, 1ull); while ((long long)(*(volatile unsigned long long *)bar - target) < 0); __threadfence(); }
    __syncthreads();
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}
// check only (every block, grid-stride) then copy, no barrier (wrong semantics: cost of the check reads alone)
extern "C" __global__ void x_chk(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per,
    unsigned long long n, unsigned hi, unsigned long long *word) {
    page_check_range(sidx, didx, n, 0, hi, 0, hi, word, 0);
    __syncthreads();
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}
// PDL: the gated copy waits for the check grid (griddepcontrol.wait) after launching early
extern "C" __global__ void x_pdl_copy(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per,
    const unsigned long long *gate, unsigned long long gbase) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (page_outcome(gate, gbase) != ~0ull) return;
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}
extern "C" __global__ void x_pdl_check(const unsigned *lidx, const unsigned *ridx, unsigned long long n, unsigned hi,
    unsigned long long *word, unsigned long long gbase) {
    page_check_range(lidx, ridx, n, 0, hi, 0, hi, word, gbase);
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// lenient: per-page check as the indices are loaded (bad pages skipped, no barrier)
extern "C" __global__ void x_len(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per,
    unsigned hi, unsigned long long *word) {
    __shared__ unsigned long long ss[64], sdst[64], sl[64];
    unsigned ipb = blockDim.x / g, slot = threadIdx.x / g, lane = threadIdx.x % g;
    for (unsigned long long base = (unsigned long long)blockIdx.x * per; base < nitems; base += (unsigned long long)gridDim.x * per) {
        unsigned long long w = base + threadIdx.x;
        if (threadIdx.x < per && w < nitems) {
            unsigned long long p = chunks == 1 ? w : w / chunks, off = (w - p * chunks) * chunk;
            unsigned long long si = sidx[p], di = didx[p], rest = psize - off;
            int bad = si > hi || di > hi;
            if (bad) atomicMin(word, p << 1);
            ss[threadIdx.x] = sbase + si * psize + off; sdst[threadIdx.x] = dbase + di * psize + off;
            sl[threadIdx.x] = bad ? 0 : rest < chunk ? rest : chunk;
        }
        __syncthreads();
        for (unsigned j = slot; j < per && base + j < nitems; j += ipb)
            group_copy((const unsigned char *)ss[j], (unsigned char *)sdst[j], sl[j], lane, g);
        __syncthreads();
    }
}
// barrier with backoff in the spin
extern "C" __global__ void x_bars(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per,
    unsigned long long *bar, unsigned long long target, unsigned ns) {
    __syncthreads();
    if (threadIdx.x == 0) { __threadfence(); atomicAdd(bar, 1ull); while ((long long)(*(volatile unsigned long long *)bar - target) < 0) __nanosleep(ns); __threadfence(); }
    __syncthreads();
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}
// cooperative groups' grid sync
extern "C" __global__ void x_cg(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per) {
    cooperative_groups::this_grid().sync();
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}
// every block checks every entry itself (the same answer everywhere): no barrier
extern "C" __global__ void x_rchk(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
    unsigned long long sbase, unsigned long long dbase, unsigned long long psize, unsigned long long chunk, unsigned g, unsigned per,
    unsigned long long n, unsigned hi, unsigned long long *word) {
    __shared__ int bad;
    if (threadIdx.x == 0) bad = 0;
    __syncthreads();
    unsigned mx = 0;
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) { unsigned a = sidx[i], b = didx[i]; mx = a > mx ? a : mx; mx = b > mx ? b : mx; }
    if (__any_sync(0xffffffffu, mx > hi) && (threadIdx.x & 31) == 0) bad = 1;
    __syncthreads();
    if (bad) { if (blockIdx.x == 0 && threadIdx.x == 0) *word = 0; return; }
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}
static void pick(std::vector<unsigned> &idx, unsigned n, unsigned pool, uint64_t &g) {
    std::vector<unsigned> all(pool); for (unsigned i = 0; i < pool; i++) all[i] = i;
    for (unsigned i = 0; i < n; i++) { g ^= g << 13; g ^= g >> 7; g ^= g << 17; unsigned j = i + (unsigned)(g % (pool - i)); std::swap(all[i], all[j]); idx[i] = all[i]; }
}
int main(int argc, char **argv) {
    size_t total = (size_t)(argc > 1 ? atoi(argv[1]) : 32) << 20; int reps = argc > 2 ? atoi(argv[2]) : 30;
    int nd = 0; CK(cudaGetDeviceCount(&nd)); int peer = nd > 1 ? 1 : 0; size_t span = 2 * total; char *src, *dst;
    CK(cudaSetDevice(peer)); CK(cudaMalloc(&dst, span)); if (peer) cudaDeviceEnablePeerAccess(0, 0);
    CK(cudaSetDevice(0)); CK(cudaMalloc(&src, span)); if (peer) cudaDeviceEnablePeerAccess(1, 0);
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    unsigned long long *gword, *gout; CK(cudaMalloc(&gword, 16)); CK(cudaMemset(gword, 0xff, 16)); CK(cudaHostAlloc(&gout, 8, 0));
    unsigned gen = 0; unsigned long long arrived = ~0ull; int fm = 0, bm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fm, gw_page_fused, 256, 0)); fm *= sms;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bm, x_bar, 256, 0)); bm *= sms;
    const char *names[] = {"ce", "copy", "coop-copy", "bar+copy", "chk+copy", "fused", "split", "pdl-split", "lenient", "bar-ns32", "bar-ns256", "bar-cg", "rchk", "bar-264"};
    const int NV = 14;
    printf("# check_forms: %zu MiB GPU0->GPU%d, %d SMs, coop max %d/%d blocks, median of %d (us)\n", total >> 20, peer, sms, fm, bm, reps);
    printf("%6s", "page"); for (int m = 0; m < NV; m++) printf(" %9s", names[m]); printf("\n");
    size_t psz[] = {2048, 16384, 131072}; uint64_t g = 0x9e3779b97f4a7c15ull;
    for (size_t ps : psz) {
        unsigned n = (unsigned)(total / ps);
        std::vector<unsigned> si(n), di(n); pick(si, n, 2 * n, g); pick(di, n, 2 * n, g);
        unsigned *dsi, *ddi; CK(cudaMalloc(&dsi, n * 4)); CK(cudaMalloc(&ddi, n * 4));
        CK(cudaMemcpy(dsi, si.data(), n * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(ddi, di.data(), n * 4, cudaMemcpyHostToDevice));
        double med[NV];
        for (int m = 0; m < NV; m++) {
            std::vector<float> t;
            for (int r = 0; r < reps + 3; r++) {
                CK(cudaEventRecord(e0, s));
                unsigned gg, per; unsigned long long chunk = ps < 65536 ? ps : 65536; unsigned chunks = (unsigned)((ps + chunk - 1) / chunk);
                unsigned long long ni = (unsigned long long)n * chunks, nn = n; unsigned b = cur_grid(ni, chunk, &gg, &per);
                unsigned long long sb = (unsigned long long)src, db = (unsigned long long)dst, pz = ps; unsigned hi = 2 * n - 1, lo = 0, get = 0;
                const unsigned long long *nog = nullptr; unsigned long long z = 0, *noo = nullptr;
                unsigned long long gbase = (unsigned long long)(0x7fffffffu - ++gen) << 33;
                switch (m) {
                case 0: CK(cudaMemcpyPeerAsync(dst, peer, src, 0, total, s)); break;
                case 1: gw_page_copy<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, sb, db, pz, chunk, gg, per, nullptr, 0, nullptr); break;
                case 2: { unsigned fb = b < (unsigned)fm ? b : fm; void *a[13] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per, &nog, &z, &noo};
                    CK(cudaLaunchCooperativeKernel((void *)gw_page_copy, fb, 256, a, 0, s)); break; }
                case 3: { unsigned fb = b < (unsigned)bm ? b : bm; unsigned long long target = arrived + fb, *bar = gword + 1;
                    void *a[12] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per, &bar, &target};
                    CK(cudaLaunchCooperativeKernel((void *)x_bar, fb, 256, a, 0, s)); arrived = target; break; }
                case 4: x_chk<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, sb, db, pz, chunk, gg, per, nn, hi, gword); break;
                case 5: { unsigned fb = b < (unsigned)fm ? b : fm; unsigned long long target = arrived + fb, *bar = gword + 1;
                    void *a[21] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per, &nn, &get, &lo, &hi, &lo, &hi, &gword, &gbase, &bar, &target, &gout};
                    CK(cudaLaunchCooperativeKernel((void *)gw_page_fused, fb, 256, a, 0, s)); arrived = target; break; }
                case 6: gw_page_check<<<(n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024, 256, 0, s>>>(dsi, ddi, nn, lo, hi, lo, hi, gword, gbase);
                    gw_page_copy<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, sb, db, pz, chunk, gg, per, gword, gbase, gout); break;
                case 7: { x_pdl_check<<<(n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024, 256, 0, s>>>(dsi, ddi, nn, hi, gword, gbase);
                    cudaLaunchConfig_t cfg = {}; cfg.gridDim = b; cfg.blockDim = 256; cfg.stream = s;
                    cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
                    cfg.attrs = at; cfg.numAttrs = 1; const unsigned long long *gw = gword;
                    CK(cudaLaunchKernelEx(&cfg, x_pdl_copy, (const unsigned *)dsi, (const unsigned *)ddi, ni, chunks, sb, db, pz, chunk, gg, per, gw, gbase)); break; }
                case 8: x_len<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, sb, db, pz, chunk, gg, per, hi, gword); break;
                case 9: case 10: { unsigned fb = b < (unsigned)bm ? b : bm; unsigned long long target = arrived + fb, *bar = gword + 1; unsigned ns = m == 9 ? 32 : 256;
                    void *a[13] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per, &bar, &target, &ns};
                    CK(cudaLaunchCooperativeKernel((void *)x_bars, fb, 256, a, 0, s)); arrived = target; break; }
                case 11: { unsigned fb = b < (unsigned)bm ? b : bm; void *a[10] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per};
                    CK(cudaLaunchCooperativeKernel((void *)x_cg, fb, 256, a, 0, s)); break; }
                case 12: x_rchk<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, sb, db, pz, chunk, gg, per, nn, hi, gword); break;
                case 13: { unsigned fb = b < 264u ? b : 264u; unsigned long long target = arrived + fb, *bar = gword + 1;
                    void *a[12] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per, &bar, &target};
                    CK(cudaLaunchCooperativeKernel((void *)x_bar, fb, 256, a, 0, s)); arrived = target; break; }
                }
                CK(cudaGetLastError()); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (r >= 3) t.push_back(ms);
            }
            std::sort(t.begin(), t.end()); med[m] = t[t.size() / 2] * 1e3;
        }
        printf("%5zuK", ps >> 10); for (int m = 0; m < NV; m++) printf(" %9.1f", med[m]); printf("\n");
        printf("%6s", "/ce"); for (int m = 0; m < NV; m++) printf(" %9.3f", med[0] / med[m]); printf("\n");
        cudaFree(dsi); cudaFree(ddi);
    }
    return 0;
}
