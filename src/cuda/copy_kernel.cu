/* SPDX-License-Identifier: Apache-2.0 */
// copy_kernel.cu - the batched gather/scatter copy kernel (mem layer).
//
// Not compiled by the library's build: scripts/gen-copy-kernel.sh turns it
// into PTX with nvcc and writes src/cuda/copy_kernel_ptx.h, which is
// committed; src/cuda/copy_kernel.c loads that PTX with cuModuleLoadData at
// run time (the driver compiles it for the GPU at hand), so libgpuwire needs
// no CUDA to build.
//
// One descriptor per block (grid-stride over descriptors): its threads copy
// the block with 16-byte loads and stores when both ends are 16-byte aligned,
// byte by byte otherwise.  Three threads load the descriptor into shared
// memory (a PCIe read per thread made a batch of 4096 blocks cost ~250 us
// on an H100).  The host cuts descriptors to at most 64 KiB so
// that large blocks spread over many SMs.  Descriptors are read straight from
// pinned host memory (unified addressing).
//
// gw_page_copy is the paged form (gw_xfer_pages): no descriptors, only the
// two page index arrays (pinned host memory, or the caller's in GPU memory;
// NULL for 0..n-1), the two bases and the page size; the kernel computes
// every address itself.  For arrays in GPU memory gw_page_fused checks every
// entry against each side's valid pages and copies only when all are
// inside, in one cooperative launch; where that launch is not possible,
// gw_page_check does the check and gw_page_copy's gate stops the copy;
// for few entries gw_page_rcheck checks them all in every block instead.
// gw_list_copy is the list form (gw_xfer_batch): the two index arrays
// (pinned host memory) and the two prepared lists' entry tables (copies in
// GPU memory, or pinned host memory, kept with the lists); entry i copies
// stab[sidx[i]] to dtab[didx[i]], each side's address plus a constant (the
// peer's allocation as mapped here).
// gw_table_copy is the list form over lists of several regions
// (gw_dlist_local_table / gw_dlist_remote_table, computed): a side is either
// a table as above or region bases (pinned host memory, the peer's as
// mapped here) and blocks per region, entry j at base[j / per] +
// (j % per) * clen; no per-entry work on the host at all.
struct gw_copy_desc {
    unsigned long long src, dst, len;
};

extern "C" __global__ void gw_batch_copy(const gw_copy_desc *d, unsigned int n)
{
    __shared__ unsigned long long sd[3];
    for (unsigned int i = blockIdx.x; i < n; i += gridDim.x) {
        /* one read of the descriptor (host memory, over PCIe) per block, not per thread */
        if (threadIdx.x < 3)
            sd[threadIdx.x] = ((const unsigned long long *)&d[i])[threadIdx.x];
        __syncthreads();
        const unsigned char *s = (const unsigned char *)sd[0];
        unsigned char *t = (unsigned char *)sd[1];
        unsigned long long len = sd[2];
        __syncthreads(); /* every thread has it before the next one is loaded */
        unsigned long long k = threadIdx.x;
        if ((((unsigned long long)s | (unsigned long long)t) & 15ull) == 0) {
            unsigned long long nv = len >> 4;
            const uint4 *sv = (const uint4 *)s;
            uint4 *tv = (uint4 *)t;
            for (; k < nv; k += blockDim.x)
                tv[k] = sv[k];
            k = (nv << 4) + threadIdx.x;
        }
        for (; k < len; k += blockDim.x)
            t[k] = s[k];
    }
}

// One item copied by a group of g threads (this thread is `lane` of it):
// 16-byte accesses with four loads in flight per thread when both ends are
// 16-byte aligned, bytes otherwise.
static __device__ __forceinline__ void group_copy(const unsigned char *s, unsigned char *t, unsigned long long len,
                                                  unsigned int lane, unsigned int g)
{
    unsigned long long k = lane;
    if ((((unsigned long long)s | (unsigned long long)t) & 15ull) == 0) {
        unsigned long long nv = len >> 4;
        const uint4 *sv = (const uint4 *)s;
        uint4 *tv = (uint4 *)t;
        for (; k + 3ull * g < nv; k += 4ull * g) {
            uint4 a = sv[k], b = sv[k + g], c = sv[k + 2ull * g], d = sv[k + 3ull * g];
            tv[k] = a;
            tv[k + g] = b;
            tv[k + 2ull * g] = c;
            tv[k + 3ull * g] = d;
        }
        for (; k < nv; k += g)
            tv[k] = sv[k];
        k = (nv << 4) + lane;
    }
    for (; k < len; k += g)
        t[k] = s[k];
}

// The outcome word of a bounds check of page index arrays in GPU memory
// (gw_page_check, gw_page_fused).  Entry i's bad value is gbase | (i << 1 |
// side), side 0 local, 1 remote; the first bad entry wins by atomicMin.
// gbase is the transfer's generation in the top 31 bits, counted down: the
// host gives each transfer on the word's stream a lower gbase than the one
// before, so a value of an earlier transfer is above every value of this
// one, and the word needs no reset between transfers: this transfer found
// a bad entry exactly when the word is below gbase + 2^33.  The host resets
// the word to all ones only when the generations run out.
#define GW_PAGE_BAD_SPAN (1ull << 33)

// The outcome: the bad entry's (i << 1 | side), or all ones when none.
static __device__ __forceinline__ unsigned long long page_outcome(const unsigned long long *word,
                                                                  unsigned long long gbase)
{
    unsigned long long v = *(const volatile unsigned long long *)word;
    return v >= gbase && v - gbase < GW_PAGE_BAD_SPAN ? v - gbase : ~0ull;
}

// The rounds of the paged form (gw_page_copy, gw_page_fused): see below.
static __device__ __forceinline__ void page_rounds(const unsigned int *sidx, const unsigned int *didx,
                                                   unsigned long long nitems, unsigned int chunks,
                                                   unsigned long long sbase, unsigned long long dbase,
                                                   unsigned long long psize, unsigned long long chunk, unsigned int g,
                                                   unsigned int per)
{
    __shared__ unsigned long long ss[64], sdst[64], sl[64];
    unsigned int ipb = blockDim.x / g, slot = threadIdx.x / g, lane = threadIdx.x % g;
    for (unsigned long long base = (unsigned long long)blockIdx.x * per; base < nitems;
         base += (unsigned long long)gridDim.x * per) {
        unsigned long long w = base + threadIdx.x;
        if (threadIdx.x < per && w < nitems) {
            unsigned long long p = chunks == 1 ? w : w / chunks, off = (w - p * chunks) * chunk;
            unsigned long long si = sidx ? sidx[p] : p, di = didx ? didx[p] : p, rest = psize - off;
            ss[threadIdx.x] = sbase + si * psize + off;
            sdst[threadIdx.x] = dbase + di * psize + off;
            sl[threadIdx.x] = rest < chunk ? rest : chunk;
        }
        __syncthreads();
        for (unsigned int j = slot; j < per && base + j < nitems; j += ipb)
            group_copy((const unsigned char *)ss[j], (unsigned char *)sdst[j], sl[j], lane, g);
        __syncthreads(); /* every group is done with the round before the next is loaded */
    }
}

// The paged form.  Work item w (of n pages x `chunks` pieces of at most
// `chunk` bytes) is piece w % chunks of page p = w / chunks, copied from
// sbase + sidx[p] * psize to dbase + didx[p] * psize (a NULL index array
// reads as p).  A group of g threads (a power of two, 32 .. blockDim.x)
// copies one item at a time; a block holds blockDim.x / g groups.  A block
// takes `per` consecutive items per round (at most 64, a multiple of its
// groups): their indices are read by `per` threads at once (host memory,
// over PCIe: one round trip for the round, not one per page) into shared
// memory, then the groups copy them.  The host sizes `per` so that the grid
// is about one wave.  `gate` (NULL: none) is the outcome word gw_page_check
// wrote before this launch on the same stream, for generation gbase: when
// it holds a bad entry every block returns before it copies anything.
// `out` (NULL: none; pinned host memory) gets the outcome from block 0.
extern "C" __global__ void gw_page_copy(const unsigned int *sidx, const unsigned int *didx,
                                        unsigned long long nitems, unsigned int chunks, unsigned long long sbase,
                                        unsigned long long dbase, unsigned long long psize,
                                        unsigned long long chunk, unsigned int g, unsigned int per,
                                        const unsigned long long *gate, unsigned long long gbase,
                                        unsigned long long *out)
{
    if (gate) {
        unsigned long long o = page_outcome(gate, gbase);
        if (out && blockIdx.x == 0 && threadIdx.x == 0)
            *(volatile unsigned long long *)out = o;
        if (o != ~0ull)
            return; /* an index is out of range: nothing moves */
    }
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}

// The bounds check of page index arrays that live in GPU memory (the host
// never reads them): entry i is bad when lidx[i] is outside [llo, lhi] or
// ridx[i] outside [rlo, rhi] (a NULL array is not checked: the host did);
// the bad entries' values go into *word by atomicMin (the outcome word
// above, generation gbase).  One coalesced read of each array; an atomic
// only for a bad entry.
static __device__ __forceinline__ void page_check_range(const unsigned int *lidx, const unsigned int *ridx,
                                                        unsigned long long n, unsigned int llo, unsigned int lhi,
                                                        unsigned int rlo, unsigned int rhi, unsigned long long *word,
                                                        unsigned long long gbase)
{
    unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        unsigned long long bad = ~0ull;
        if (lidx) {
            unsigned int v = lidx[i];
            if (v < llo || v > lhi)
                bad = i << 1;
        }
        if (bad == ~0ull && ridx) {
            unsigned int v = ridx[i];
            if (v < rlo || v > rhi)
                bad = (i << 1) | 1ull;
        }
        if (bad != ~0ull)
            atomicMin(word, gbase | bad);
    }
}

extern "C" __global__ void gw_page_check(const unsigned int *lidx, const unsigned int *ridx, unsigned long long n,
                                         unsigned int llo, unsigned int lhi, unsigned int rlo, unsigned int rhi,
                                         unsigned long long *word, unsigned long long gbase)
{
    page_check_range(lidx, ridx, n, llo, lhi, rlo, rhi, word, gbase);
}

// The check and the paged form in one launch, for index arrays in GPU
// memory: every block checks its share of the entries (gw_page_check's
// rules; lidx/ridx are sidx/didx in the order `get` says), then waits at a
// grid-wide barrier, then every block reads the outcome word: all copy
// (gw_page_copy's rounds) or none does.  Block 0 writes the outcome to
// `out` (pinned host memory).  The barrier is the counter *bar, which only
// grows: each block adds one, and waits until it reaches `target` (the
// host's running count of blocks launched on it, this launch's included;
// compared modulo 2^64).  It needs every block resident at once: the host
// launches it with cuLaunchCooperativeKernel, the grid no larger than the
// device holds.
extern "C" __global__ void gw_page_fused(const unsigned int *sidx, const unsigned int *didx,
                                         unsigned long long nitems, unsigned int chunks, unsigned long long sbase,
                                         unsigned long long dbase, unsigned long long psize,
                                         unsigned long long chunk, unsigned int g, unsigned int per,
                                         unsigned long long n, unsigned int get, unsigned int llo, unsigned int lhi,
                                         unsigned int rlo, unsigned int rhi, unsigned long long *word,
                                         unsigned long long gbase, unsigned long long *bar, unsigned long long target,
                                         unsigned long long *out)
{
    page_check_range(get ? didx : sidx, get ? sidx : didx, n, llo, lhi, rlo, rhi, word, gbase);
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(bar, 1ull);
        while ((long long)(*(volatile unsigned long long *)bar - target) < 0)
            ;
        __threadfence();
    }
    __syncthreads();
    unsigned long long o = page_outcome(word, gbase);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *(volatile unsigned long long *)out = o;
    if (o != ~0ull)
        return; /* an index is out of range: nothing moves */
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}

// The check and the paged form for few entries (the host launches it for
// at most a few thousand): every block reads every entry of both arrays
// itself (lidx/ridx are sidx/didx in the order `get` says, gw_page_check's
// rules) and so finds the same first bad entry as every other block: all
// copy or none does, with no barrier, no outcome word and no cooperative
// launch.  Block 0 writes the outcome ((i << 1 | side) of the first bad
// entry, or all ones) to `out` (pinned host memory).
extern "C" __global__ void gw_page_rcheck(const unsigned int *sidx, const unsigned int *didx,
                                          unsigned long long nitems, unsigned int chunks, unsigned long long sbase,
                                          unsigned long long dbase, unsigned long long psize,
                                          unsigned long long chunk, unsigned int g, unsigned int per,
                                          unsigned long long n, unsigned int get, unsigned int llo, unsigned int lhi,
                                          unsigned int rlo, unsigned int rhi, unsigned long long *out)
{
    __shared__ unsigned long long first;
    if (threadIdx.x == 0)
        first = ~0ull;
    __syncthreads();
    const unsigned int *l = get ? didx : sidx, *r = get ? sidx : didx;
    unsigned long long mine = ~0ull;
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) {
        if (l) {
            unsigned int v = l[i];
            if (v < llo || v > lhi) {
                mine = i << 1;
                break;
            }
        }
        if (r) {
            unsigned int v = r[i];
            if (v < rlo || v > rhi) {
                mine = (i << 1) | 1ull;
                break;
            }
        }
    }
    if (mine != ~0ull) /* (a thread's first bad entry is its lowest: the block's lowest wins) */
        atomicMin(&first, mine);
    __syncthreads();
    unsigned long long o = first;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *(volatile unsigned long long *)out = o;
    if (o != ~0ull)
        return; /* an index is out of range: nothing moves */
    page_rounds(sidx, didx, nitems, chunks, sbase, dbase, psize, chunk, g, per);
}

// The list form.  Item w copies stab[si].len bytes from stab[si].addr +
// sdelta to dtab[di].addr + ddelta, si = sidx[w] and di = didx[w] (a NULL
// index array reads as w); entries are shorter than 64 KiB (the host sends
// longer ones as descriptors).  Groups, rounds and `per` as gw_page_copy:
// `per` threads read a round's indices, then its table entries (two
// dependent reads per round: the indices over PCIe), into shared memory.
struct gw_list_ent {
    unsigned long long addr, len;
};
extern "C" __global__ void gw_list_copy(const unsigned int *sidx, const unsigned int *didx, const gw_list_ent *stab,
                                        const gw_list_ent *dtab, unsigned long long n, unsigned long long sdelta,
                                        unsigned long long ddelta, unsigned int g, unsigned int per)
{
    __shared__ unsigned long long ss[64], sdst[64], sl[64];
    unsigned int ipb = blockDim.x / g, slot = threadIdx.x / g, lane = threadIdx.x % g;
    for (unsigned long long base = (unsigned long long)blockIdx.x * per; base < n;
         base += (unsigned long long)gridDim.x * per) {
        unsigned long long w = base + threadIdx.x;
        if (threadIdx.x < per && w < n) {
            unsigned long long si = sidx ? sidx[w] : w, di = didx ? didx[w] : w;
            gw_list_ent se = stab[si];
            ss[threadIdx.x] = se.addr + sdelta;
            sdst[threadIdx.x] = dtab[di].addr + ddelta;
            sl[threadIdx.x] = se.len;
        }
        __syncthreads();
        for (unsigned int j = slot; j < per && base + j < n; j += ipb)
            group_copy((const unsigned char *)ss[j], (unsigned char *)sdst[j], sl[j], lane, g);
        __syncthreads();
    }
}

// The list form over region tables.  Item w (of nitems = entries x chunks)
// is piece w % chunks (at most `chunk` bytes) of entry e = w / chunks,
// si = sidx[e], di = didx[e] (a NULL index array reads as e).  A side with a
// table (stab, dtab) reads entry si there, its address plus the side's
// delta; a side without one is computed: region r = si / sper of the side's
// bases, block si % sper, at sbase[r] + block * clen (+ delta).  The length
// is the source table's, else the destination table's, else clen; a piece
// past an entry's end copies nothing.  Groups, rounds and `per` as
// gw_page_copy.
extern "C" __global__ void gw_table_copy(const unsigned int *sidx, const unsigned int *didx,
                                         const gw_list_ent *stab, const gw_list_ent *dtab,
                                         const unsigned long long *sbase, const unsigned long long *dbase,
                                         unsigned int sper, unsigned int dper, unsigned long long clen,
                                         unsigned long long sdelta, unsigned long long ddelta,
                                         unsigned long long nitems, unsigned int chunks, unsigned long long chunk,
                                         unsigned int g, unsigned int per)
{
    __shared__ unsigned long long ss[64], sdst[64], sl[64];
    unsigned int ipb = blockDim.x / g, slot = threadIdx.x / g, lane = threadIdx.x % g;
    for (unsigned long long base = (unsigned long long)blockIdx.x * per; base < nitems;
         base += (unsigned long long)gridDim.x * per) {
        unsigned long long w = base + threadIdx.x;
        if (threadIdx.x < per && w < nitems) {
            unsigned long long e = chunks == 1 ? w : w / chunks, off = (w - e * chunks) * chunk;
            unsigned long long si = sidx ? sidx[e] : e, di = didx ? didx[e] : e, len = clen, s, d;
            if (stab) {
                gw_list_ent se = stab[si];
                s = se.addr;
                len = se.len;
            } else {
                unsigned long long r = si / sper;
                s = sbase[r] + (si - r * sper) * clen;
            }
            if (dtab) {
                gw_list_ent de = dtab[di];
                d = de.addr;
                len = stab ? len : de.len;
            } else {
                unsigned long long r = di / dper;
                d = dbase[r] + (di - r * dper) * clen;
            }
            unsigned long long rest = len > off ? len - off : 0;
            ss[threadIdx.x] = s + sdelta + off;
            sdst[threadIdx.x] = d + ddelta + off;
            sl[threadIdx.x] = rest < chunk ? rest : chunk;
        }
        __syncthreads();
        for (unsigned int j = slot; j < per && base + j < nitems; j += ipb)
            group_copy((const unsigned char *)ss[j], (unsigned char *)sdst[j], sl[j], lane, g);
        __syncthreads();
    }
}
