/* SPDX-License-Identifier: Apache-2.0 */
/* page_variants.cu - ways a GPU could move scattered pages to a peer GPU,
 * timed by CUDA events against one contiguous copy-engine copy of the same
 * bytes: the library's page kernel (gw_page_copy, included from
 * src/cuda/copy_kernel.cu, with the geometry copy_kernel.c gives it, at
 * GPUWIRE_COPY_KERNEL_MOVES 2 and 4), flat grid-stride copies with 4 or 8
 * 16-byte loads in flight per thread (grid-strided, or a block per
 * contiguous run of the transfer), 4 to 16 blocks per SM, and the driver's
 * cudaMemcpyBatchAsync (one copy-engine copy per page).  GPU 0 -> GPU 1
 * with peer access (GPU 0 alone where there is one), pages picked at
 * random, distinct, from a pool twice the transfer, indices in GPU memory;
 * every variant's last copy is checked (first and last word of each page).
 * The pull-* variants run on GPU 1 instead (its stream, its copies of the
 * indices): the same copy as a read of GPU 0's memory over NVLink rather
 * than a write into GPU 1's, and pull-ce the copy engine driven from GPU 1.
 * The dev-* variants are the library's forms for index arrays in GPU
 * memory whose bounds the GPU checks (gw_xfer_pages with GW_INDEX_DEVICE):
 * dev-reset resets the bounds word, runs gw_page_check, the gated
 * gw_page_copy and copies the word back to pinned memory (four operations
 * on the stream); dev-split runs the check and the gated page kernel, which
 * writes the outcome to pinned memory itself (two launches, the word's
 * generation instead of a reset); dev-fused is gw_page_fused, the check and
 * the copy in one cooperative launch behind a grid barrier.
 * It answers whether the page kernel is what keeps paged transfers under
 * the copy engine (bench/compare/kv_shapes.py, docs/PERFORMANCE.md
 * section 11).  Built by hand on the GPU machine (CUDA runtime, nvcc):
 *   nvcc -O3 -arch=sm_90 -o page_variants bench/device/page_variants.cu
 *   ./page_variants [TOTAL_MIB (default 32)] [REPS (default 30)] */
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1);} } while (0)

// the library's page kernel itself (gw_page_copy and the helpers it uses)
#include "../../src/cuda/copy_kernel.cu"
static unsigned cur_grid(unsigned long long nitems, unsigned long long len, unsigned *g_out, unsigned *per_out, int moves, unsigned wave) {
    unsigned g = 32;
    while (g < 256 && (unsigned long long)g * 2 * 16 * (unsigned)moves <= len) g *= 2;
    unsigned ipb = 256 / g;
    unsigned long long per = (nitems + wave - 1) / wave;
    per = per < ipb ? ipb : per > 64 ? 64 : (per + ipb - 1) / ipb * ipb;
    unsigned long long nb = (nitems + per - 1) / per;
    *g_out = g; *per_out = (unsigned)per;
    return nb < 8192 ? (unsigned)nb : 8192;
}
// --- flat: vector v of the transfer is vector v % pv of page v / pv (pv = 1 << lg); U loads in flight per thread
template <int U>
__global__ void flat(const unsigned *sidx, const unsigned *didx, unsigned long long tot, unsigned lg, const uint4 *__restrict__ sb, uint4 *__restrict__ db) {
    unsigned long long T = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long pm = (1ull << lg) - 1;
    for (unsigned long long v0 = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; v0 < tot; v0 += T * U) {
        uint4 r[U]; unsigned long long d[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            unsigned long long v = v0 + u * T;
            if (v < tot) { unsigned long long p = v >> lg, o = v & pm; r[u] = sb[((unsigned long long)sidx[p] << lg) + o]; d[u] = ((unsigned long long)didx[p] << lg) + o; }
        }
#pragma unroll
        for (int u = 0; u < U; u++) { unsigned long long v = v0 + u * T; if (v < tot) db[d[u]] = r[u]; }
    }
}
// --- blocked flat: block b takes a contiguous chunk of vectors (better locality: a warp stays in a page), U in flight
template <int U>
__global__ void bflat(const unsigned *sidx, const unsigned *didx, unsigned long long tot, unsigned lg, const uint4 *__restrict__ sb, uint4 *__restrict__ db) {
    unsigned long long pm = (1ull << lg) - 1;
    unsigned long long per_block = (tot + gridDim.x - 1) / gridDim.x;
    per_block = (per_block + blockDim.x * U - 1) / (blockDim.x * U) * (blockDim.x * U);
    unsigned long long lo = (unsigned long long)blockIdx.x * per_block, hi = lo + per_block < tot ? lo + per_block : tot;
    for (unsigned long long v0 = lo + threadIdx.x; v0 < hi; v0 += (unsigned long long)blockDim.x * U) {
        uint4 r[U]; unsigned long long d[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            unsigned long long v = v0 + (unsigned long long)u * blockDim.x;
            if (v < hi) { unsigned long long p = v >> lg, o = v & pm; r[u] = sb[((unsigned long long)sidx[p] << lg) + o]; d[u] = ((unsigned long long)didx[p] << lg) + o; }
        }
#pragma unroll
        for (int u = 0; u < U; u++) { unsigned long long v = v0 + (unsigned long long)u * blockDim.x; if (v < hi) db[d[u]] = r[u]; }
    }
}

// --- bulk copies through shared memory (Hopper's TMA: cp.async.bulk), one
// thread per block issuing: item k of the block (a page, or a piece of at
// most ITEM bytes of one) is loaded into stage k % NST (an mbarrier tells
// its arrival), then stored to the peer as a bulk group; a stage is
// reloaded once its store has read it.  Up to NST stores in flight a block.
static __device__ __forceinline__ unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
template <int NST, int ITEM>
__global__ void tma(const unsigned *sidx, const unsigned *didx, unsigned long long nitems, unsigned chunks,
                    const char *sb, char *db, unsigned long long psize) {
    __shared__ __align__(128) char buf[NST][ITEM];
    __shared__ __align__(8) unsigned long long bar[NST];
    if (threadIdx.x != 0) return;
    for (int i = 0; i < NST; i++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&bar[i])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    unsigned long long k = 0;
    for (unsigned long long w = blockIdx.x; w < nitems; w += gridDim.x, k++) {
        unsigned s = (unsigned)(k % NST);
        if (k >= NST) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(NST - 1) : "memory");
        unsigned long long p = w / chunks, off = (w - p * chunks) * ITEM, rest = psize - off;
        unsigned n = (unsigned)(rest < ITEM ? rest : ITEM);
        const char *src = sb + (unsigned long long)sidx[p] * psize + off;
        char *dst = db + (unsigned long long)didx[p] * psize + off;
        unsigned b = smem_u32(&bar[s]), m = smem_u32(buf[s]);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(n) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(m), "l"(src), "r"(n), "r"(b) : "memory");
        unsigned par = (unsigned)((k / NST) & 1);
        asm volatile("{\n .reg .pred P1;\n WAIT%=:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n @!P1 bra WAIT%=;\n}"
                     ::"r"(b), "r"(par) : "memory");
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(m), "r"(n) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
template <int NST, int ITEM>
static void tma_launch(unsigned blocks, cudaStream_t s, const unsigned *si, const unsigned *di, unsigned n, const char *sb,
                       char *db, unsigned long long ps) {
    unsigned long long item = ps < ITEM ? ps : ITEM;
    unsigned chunks = (unsigned)((ps + item - 1) / item);
    /* pages shorter than ITEM: one item a page, else pieces of ITEM */
    tma<NST, ITEM><<<blocks, 32, 0, s>>>(si, di, (unsigned long long)n * chunks, chunks, sb, db, ps);
}
static void pick(std::vector<unsigned> &idx, unsigned n, unsigned pool, uint64_t &g) {
    std::vector<unsigned> all(pool); for (unsigned i = 0; i < pool; i++) all[i] = i;
    for (unsigned i = 0; i < n; i++) { g ^= g << 13; g ^= g >> 7; g ^= g << 17; unsigned j = i + (unsigned)(g % (pool - i)); std::swap(all[i], all[j]); idx[i] = all[i]; }
}
int main(int argc, char **argv) {
    size_t total = (size_t)(argc > 1 ? atoi(argv[1]) : 32) << 20; int reps = argc > 2 ? atoi(argv[2]) : 30;
    int nd = 0; CK(cudaGetDeviceCount(&nd)); int peer = nd > 1 ? 1 : 0;
    size_t span = 2 * total; char *src, *dst;
    CK(cudaSetDevice(peer)); CK(cudaMalloc(&dst, span)); if (peer) cudaDeviceEnablePeerAccess(0, 0);
    CK(cudaSetDevice(0)); CK(cudaMalloc(&src, span)); if (peer) cudaDeviceEnablePeerAccess(1, 0);
    std::vector<uint64_t> h(span / 8); for (size_t i = 0; i < h.size(); i++) h[i] = i * 8; CK(cudaMemcpy(src, h.data(), span, cudaMemcpyHostToDevice));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s1 = s; cudaEvent_t p0 = e0, p1 = e1; /* GPU 1's, for the pull variants */
    if (peer) { CK(cudaSetDevice(1)); CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking)); CK(cudaEventCreate(&p0)); CK(cudaEventCreate(&p1)); CK(cudaSetDevice(0)); }
    printf("# page_variants: %zu MiB, GPU0 -> GPU%d, %d SMs, median of %d (GB/s)\n", total >> 20, peer, sms, reps);
    const char *names[] = {"ce-contig", "gw(m2)", "gw(m4)", "flat4x4", "flat8x4", "flat4x8", "flat8x8", "bflat4x4", "bflat8x4", "bflat8x8", "bflat16x8", "memcpybatch", "tma4x8K/4", "tma4x8K/6", "tma2x16K/6", "tma8x4K/6", "dev-reset", "dev-split", "dev-fused", "pull-ce", "pull-gw2", "pull-bf8x4"};
    const int NV = peer ? 22 : 19;
    /* the dev-* variants' bounds word and barrier counter (GPU 0), outcome (pinned), generation, blocks arrived */
    unsigned long long *gword, *gout; CK(cudaMalloc(&gword, 16)); CK(cudaMemset(gword, 0xff, 16)); CK(cudaHostAlloc(&gout, 8, 0));
    unsigned gen = 0; unsigned long long arrived = ~0ull; int fused_most = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fused_most, gw_page_fused, 256, 0)); fused_most *= sms;
    printf("%6s", "page"); for (int m = 0; m < NV; m++) printf(" %11s", names[m]); printf("  checked\n");
    size_t psz[] = {2048, 4096, 16384, 65536, 131072}; uint64_t g = 0x9e3779b97f4a7c15ull;
    for (size_t ps : psz) {
        unsigned n = (unsigned)(total / ps); unsigned lg = 0; while ((16ull << lg) < ps) lg++;
        std::vector<unsigned> si(n), di(n); pick(si, n, 2 * n, g); pick(di, n, 2 * n, g);
        unsigned *dsi, *ddi; CK(cudaMalloc(&dsi, n * 4)); CK(cudaMalloc(&ddi, n * 4));
        CK(cudaMemcpy(dsi, si.data(), n * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(ddi, di.data(), n * 4, cudaMemcpyHostToDevice));
        unsigned *psi = dsi, *pdi = ddi; /* GPU 1's copies */
        if (peer) { CK(cudaSetDevice(1)); CK(cudaMalloc(&psi, n * 4)); CK(cudaMalloc(&pdi, n * 4));
            CK(cudaMemcpy(psi, si.data(), n * 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(pdi, di.data(), n * 4, cudaMemcpyHostToDevice)); CK(cudaSetDevice(0)); }
        std::vector<void *> bd(n), bs(n); std::vector<size_t> bz(n, ps);
        for (unsigned p = 0; p < n; p++) { bd[p] = dst + (size_t)di[p] * ps; bs[p] = src + (size_t)si[p] * ps; }
        double med[NV]; int bad_any = 0;
        for (int m = 0; m < NV; m++) {
            std::vector<float> t;
            CK(cudaMemsetAsync(dst, 0, span, s)); // (peer memory: memset from GPU0 context works with UVA)
            CK(cudaStreamSynchronize(s));
            int pull = m >= 19;
            if (pull) CK(cudaSetDevice(1));
            for (int r = 0; r < reps + 3; r++) {
                CK(cudaEventRecord(pull ? p0 : e0, pull ? s1 : s));
                unsigned long long tot = total / 16;
                switch (m) {
                case 0: CK(cudaMemcpyPeerAsync(dst, peer, src, 0, total, s)); break;
                case 1: case 2: { unsigned gg, per; unsigned long long chunk = ps < 65536 ? ps : 65536; unsigned chunks = (unsigned)((ps + chunk - 1) / chunk);
                    unsigned long long ni = (unsigned long long)n * chunks; unsigned b = cur_grid(ni, chunk, &gg, &per, m == 1 ? 2 : 4, 1024);
                    gw_page_copy<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, (unsigned long long)src, (unsigned long long)dst, ps, chunk, gg, per, nullptr, 0, nullptr); break; }
                case 3: flat<4><<<sms * 4, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 4: flat<4><<<sms * 8, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 5: flat<8><<<sms * 4, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 6: flat<8><<<sms * 8, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 7: bflat<4><<<sms * 4, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 8: bflat<4><<<sms * 8, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 9: bflat<8><<<sms * 8, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 10: bflat<8><<<sms * 16, 256, 0, s>>>(dsi, ddi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                case 11: { cudaMemcpyAttributes a = {}; a.srcAccessOrder = cudaMemcpySrcAccessOrderStream; size_t ai = 0;
                    cudaError_t e = cudaMemcpyBatchAsync(bd.data(), bs.data(), bz.data(), n, &a, &ai, 1, s);
                    if (e != cudaSuccess) { printf("memcpybatch: %s\n", cudaGetErrorString(e)); cudaGetLastError(); } break; }
                case 12: tma_launch<4, 8192>(sms * 4, s, dsi, ddi, n, src, dst, ps); break;
                case 13: tma_launch<4, 8192>(sms * 6, s, dsi, ddi, n, src, dst, ps); break;
                case 14: tma_launch<2, 16384>(sms * 6, s, dsi, ddi, n, src, dst, ps); break;
                case 15: tma_launch<8, 4096>(sms * 6, s, dsi, ddi, n, src, dst, ps); break;
                case 16: case 17: case 18: { unsigned gg, per; unsigned long long chunk = ps < 65536 ? ps : 65536; unsigned chunks = (unsigned)((ps + chunk - 1) / chunk);
                    unsigned long long ni = (unsigned long long)n * chunks; unsigned b = cur_grid(ni, chunk, &gg, &per, 2, 1024);
                    unsigned lo = 0, hi = 2 * n - 1; unsigned long long nn = n;
                    if (m == 16) { /* reset, check, gated copy, copy back */
                        CK(cudaMemsetAsync(gword, 0xff, 8, s));
                        gw_page_check<<<(n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024, 256, 0, s>>>(dsi, ddi, nn, lo, hi, lo, hi, gword, 0ull);
                        gw_page_copy<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, (unsigned long long)src, (unsigned long long)dst, ps, chunk, gg, per, gword, 0ull, nullptr);
                        CK(cudaMemcpyAsync(gout, gword, 8, cudaMemcpyDeviceToHost, s)); break; }
                    unsigned long long gbase = (unsigned long long)(0x7fffffffu - ++gen) << 33;
                    if (m == 17) { /* check, gated copy writing the outcome */
                        gw_page_check<<<(n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024, 256, 0, s>>>(dsi, ddi, nn, lo, hi, lo, hi, gword, gbase);
                        gw_page_copy<<<b, 256, 0, s>>>(dsi, ddi, ni, chunks, (unsigned long long)src, (unsigned long long)dst, ps, chunk, gg, per, gword, gbase, gout); break; }
                    /* one cooperative launch */
                    unsigned fb = b < (unsigned)fused_most ? b : (unsigned)fused_most, get = 0; unsigned long long target = arrived + fb;
                    unsigned long long sb = (unsigned long long)src, db = (unsigned long long)dst, pz = ps, *bar = gword + 1;
                    void *args[21] = {&dsi, &ddi, &ni, &chunks, &sb, &db, &pz, &chunk, &gg, &per, &nn, &get, &lo, &hi, &lo, &hi, &gword, &gbase, &bar, &target, &gout};
                    CK(cudaLaunchCooperativeKernel((void *)gw_page_fused, fb, 256, args, 0, s)); arrived = target; break; }
                case 19: CK(cudaMemcpyPeerAsync(dst, 1, src, 0, total, s1)); break;
                case 20: { unsigned gg, per; unsigned long long chunk = ps < 65536 ? ps : 65536; unsigned chunks = (unsigned)((ps + chunk - 1) / chunk);
                    unsigned long long ni = (unsigned long long)n * chunks; unsigned b = cur_grid(ni, chunk, &gg, &per, 2, 1024);
                    gw_page_copy<<<b, 256, 0, s1>>>(psi, pdi, ni, chunks, (unsigned long long)src, (unsigned long long)dst, ps, chunk, gg, per, nullptr, 0, nullptr); break; }
                case 21: bflat<4><<<sms * 8, 256, 0, s1>>>(psi, pdi, tot, lg, (const uint4 *)src, (uint4 *)dst); break;
                }
                CK(cudaGetLastError());
                CK(cudaEventRecord(pull ? p1 : e1, pull ? s1 : s)); CK(cudaEventSynchronize(pull ? p1 : e1));
                float ms; CK(cudaEventElapsedTime(&ms, pull ? p0 : e0, pull ? p1 : e1)); if (r >= 3) t.push_back(ms);
            }
            if (pull) CK(cudaSetDevice(0));
            std::sort(t.begin(), t.end()); med[m] = total / (t[t.size() / 2] * 1e-3) / 1e9;
            if (m >= 16 && m <= 18 && *gout != ~0ull) { bad_any = 1; printf("  %s: the check found entry %llu bad\n", names[m], *gout); }
            if (m > 0 && m != 19) { // check first and last word of every page (not the contiguous copies)
                std::vector<uint64_t> got(span / 8); CK(cudaMemcpy(got.data(), dst, span, cudaMemcpyDeviceToHost)); unsigned bad = 0;
                for (unsigned p = 0; p < n; p++) { const uint64_t *w = got.data() + (size_t)di[p] * ps / 8; uint64_t want = (uint64_t)si[p] * ps; if (w[0] != want || w[ps / 8 - 1] != want + ps - 8) bad++; }
                if (bad) { bad_any = 1; printf("  %s: %u of %u pages wrong\n", names[m], bad, n); }
            }
        }
        printf("%5zuK", ps >> 10); for (int m = 0; m < NV; m++) printf(" %11.1f", med[m]); printf("  %s\n", bad_any ? "WRONG" : "every page");
        printf("%6s", "/ce"); for (int m = 0; m < NV; m++) printf(" %11.3f", med[m] / med[0]); printf("\n");
        cudaFree(dsi); cudaFree(ddi);
        if (peer) { CK(cudaSetDevice(1)); cudaFree(psi); cudaFree(pdi); CK(cudaSetDevice(0)); }
    }
    return 0;
}
