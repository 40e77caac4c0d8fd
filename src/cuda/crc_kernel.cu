/* SPDX-License-Identifier: Apache-2.0 */
// crc_kernel.cu - CRC32C of entries in GPU memory, for the end-to-end
// integrity check (cuda layer; crc_kernel.h).
//
// Not compiled by the library's build: scripts/gen-copy-kernel.sh turns it
// into PTX with nvcc and writes src/cuda/crc_kernel_ptx.h, which is
// committed; src/cuda/crc_kernel.c loads that PTX at run time.
//
// One entry per block (grid-stride over entries).  Each thread takes the
// CRC of one run of the entry (at least 256 bytes, a multiple of 64) with a
// slicing-by-8 table in shared memory, starting from a zero register; the
// runs' registers are then joined: a register that still has z bytes of
// the entry after its run ends as itself times x^(8z) mod P (the later
// bytes' own part being the later runs' registers), a carry-less product
// made from the powers x^(8*2^k) kept in shared memory.  The entry's CRC is
// the XOR of every run's shifted register and of the initial all-ones
// register shifted by the whole length, inverted (RFC 3720's CRC32C).
// Descriptors (address, length) are read from pinned host memory, the
// results written there.
#define POLY 0x82f63b78u

__device__ static unsigned int mulmod(unsigned int a, unsigned int b)
{
    unsigned int p = 0;
    for (int i = 31; i >= 0; i--) {
        if (a & (1u << i))
            p ^= b;
        b = (b & 1u) ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* r * x^(8z) mod P */
__device__ static unsigned int shift_bytes(const unsigned int *pw, unsigned int r, unsigned long long z)
{
    for (int k = 0; z; k++, z >>= 1)
        if (z & 1ull)
            r = mulmod(pw[k], r);
    return r;
}

extern "C" __global__ void gw_crc32c_entries(const unsigned long long *d, unsigned int *out, unsigned int n)
{
    __shared__ unsigned int tab[8][256];
    __shared__ unsigned int pw[64];
    __shared__ unsigned int acc;
    __shared__ unsigned long long sd[2];
    for (unsigned int i = threadIdx.x; i < 256; i += blockDim.x) {
        unsigned int c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ POLY : c >> 1;
        tab[0][i] = c;
    }
    __syncthreads();
    for (unsigned int i = threadIdx.x; i < 256; i += blockDim.x)
        for (int t = 1; t < 8; t++)
            tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xffu];
    if (threadIdx.x == 0) {
        unsigned int v = 0x80000000u; /* x^0 */
        for (int k = 0; k < 8; k++)
            v = (v & 1u) ? (v >> 1) ^ POLY : v >> 1;
        pw[0] = v; /* x^8 */
        for (int k = 1; k < 64; k++)
            pw[k] = mulmod(pw[k - 1], pw[k - 1]);
    }
    __syncthreads();
    for (unsigned int e = blockIdx.x; e < n; e += gridDim.x) {
        if (threadIdx.x < 2)
            sd[threadIdx.x] = d[2ull * e + threadIdx.x];
        if (threadIdx.x == 0)
            acc = 0;
        __syncthreads();
        const unsigned char *p = (const unsigned char *)sd[0];
        unsigned long long len = sd[1];
        unsigned long long run = (len + blockDim.x - 1) / blockDim.x;
        run = (run + 63ull) & ~63ull;
        if (run < 256)
            run = 256;
        unsigned long long lo = (unsigned long long)threadIdx.x * run;
        if (lo < len) {
            unsigned long long hi = lo + run < len ? lo + run : len, i = lo;
            unsigned int c = 0;
            for (; i < hi && (((unsigned long long)(p + i)) & 7ull); i++)
                c = (c >> 8) ^ tab[0][(c ^ p[i]) & 0xffu];
            for (; i + 8 <= hi; i += 8) {
                unsigned long long v = *(const unsigned long long *)(p + i) ^ c;
                c = tab[7][v & 0xff] ^ tab[6][(v >> 8) & 0xff] ^ tab[5][(v >> 16) & 0xff] ^
                    tab[4][(v >> 24) & 0xff] ^ tab[3][(v >> 32) & 0xff] ^ tab[2][(v >> 40) & 0xff] ^
                    tab[1][(v >> 48) & 0xff] ^ tab[0][v >> 56];
            }
            for (; i < hi; i++)
                c = (c >> 8) ^ tab[0][(c ^ p[i]) & 0xffu];
            atomicXor(&acc, shift_bytes(pw, c, len - hi));
        }
        __syncthreads();
        if (threadIdx.x == 0)
            out[e] = ~(shift_bytes(pw, 0xffffffffu, len) ^ acc);
        __syncthreads(); /* sd and acc are the next entry's */
    }
}
