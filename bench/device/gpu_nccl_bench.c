/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_nccl_bench - NCCL send/recv between two processes, rank r on GPU r,
 * for comparison with gpuwire.  Built only where nccl.h exists
 * (bench/device/gpu_bench.sh).  Latency: half the round trip of a ping-pong;
 * bandwidth: a window of sends, then an 8-byte ack from the receiver.
 * Environment passes through to NCCL (e.g. NCCL_P2P_DISABLE=1
 * NCCL_SHM_DISABLE=1 NCCL_NET=Socket forces sockets).  The label printed is
 * argv[1] (default "nccl"). */
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tests/gpu/gpu_util.h"
#include "gpu_bench_util.h"

#define NC(call)                                                                               \
    do {                                                                                       \
        ncclResult_t n_ = (call);                                                              \
        if (n_ != ncclSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,               \
                    ncclGetErrorString(n_));                                                   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static int run_rank(int rank, ncclUniqueId id, const char *label)
{
    const gw_cuda_t *cu = gpu_require(2);
    char why[256];
    REQUIRE(gw_cuda_ctx_for_device(rank, why, sizeof(why)) != NULL);
    size_t maxs = gwb_max_size();
    CUdeviceptr buf = 0, ack = 0;
    CU_CHECK(cu->cuMemAlloc(&buf, maxs));
    CU_CHECK(cu->cuMemAlloc(&ack, 8));
    CU_CHECK(cu->cuMemsetD8(buf, rank ? 0 : 0x6b, maxs));
    CUstream s;
    CU_CHECK(cu->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ncclComm_t comm;
    NC(ncclCommInitRank(&comm, 2, id, rank));
    cudaStream_t cs = (cudaStream_t)s;
    int peer = 1 - rank;
    for (size_t i = 0; i < GWB_NSIZES && gwb_sizes[i] <= maxs; i++) {
        size_t n = gwb_sizes[i];
        int it = gwb_iters(n);
        /* ping-pong latency */
        int lit = n <= (1u << 20) ? (it > 200 ? 200 : it) : 2;
        double t0 = 0;
        for (int k = -3; k < lit; k++) {
            if (k == 0)
                t0 = gwb_now();
            if (rank == 0) {
                NC(ncclSend((void *)buf, n, ncclChar, peer, comm, cs));
                NC(ncclRecv((void *)buf, n, ncclChar, peer, comm, cs));
            } else {
                NC(ncclRecv((void *)buf, n, ncclChar, peer, comm, cs));
                NC(ncclSend((void *)buf, n, ncclChar, peer, comm, cs));
            }
            CU_CHECK(cu->cuStreamSynchronize(s));
        }
        double lat = (gwb_now() - t0) / lit / 2 * 1e6;
        /* bandwidth: window of one-way transfers, then an ack */
        t0 = gwb_now();
        for (int k = 0; k < it; k++) {
            if (rank == 0)
                NC(ncclSend((void *)buf, n, ncclChar, peer, comm, cs));
            else
                NC(ncclRecv((void *)buf, n, ncclChar, peer, comm, cs));
        }
        if (rank == 0)
            NC(ncclRecv((void *)ack, 8, ncclChar, peer, comm, cs));
        else
            NC(ncclSend((void *)ack, 8, ncclChar, peer, comm, cs));
        CU_CHECK(cu->cuStreamSynchronize(s));
        double bw = (double)n * it / (gwb_now() - t0) / 1e9;
        if (rank == 0)
            gwb_result(label, n, lat, bw);
    }
    if (rank == 1) {
        unsigned char probe[64];
        CU_CHECK(cu->cuMemcpyDtoH(probe, buf, sizeof(probe)));
        for (size_t i = 0; i < sizeof(probe); i++)
            REQUIRE(probe[i] == 0x6b);
    }
    ncclCommDestroy(comm);
    return 0;
}

int main(int argc, char **argv)
{
    const char *label = argc > 1 ? argv[1] : "nccl";
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            /* no CUDA or NCCL state exists before the fork */
            ncclUniqueId id;
            if (r == 0) {
                NC(ncclGetUniqueId(&id));
                REQUIRE(write(fds[1], &id, sizeof(id)) == (ssize_t)sizeof(id));
            } else {
                REQUIRE(read(fds[0], &id, sizeof(id)) == (ssize_t)sizeof(id));
            }
            _exit(run_rank(r, id, label));
        }
    }
    int rc = 0;
    for (int r = 0; r < 2; r++) {
        int ws = 0;
        waitpid(pids[r], &ws, 0);
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
            rc = 1;
    }
    return rc;
}
