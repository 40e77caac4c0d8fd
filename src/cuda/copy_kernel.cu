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
