/* ucx_batch_bench.c - the reference for batched puts: what NIXL's UCX
 * backend does for a transfer of N descriptors (one ucp_put_nbx per
 * descriptor, then one ucp_worker_flush_nbx, wait), between two processes on
 * this host over the UCX transports of UCX_TLS.
 *
 * usage: ucx_batch_bench N SIZE SECONDS
 * Prints one line: "ucx N SIZE GB/s descriptors/s batches".  Descriptors are
 * SIZE bytes, one SIZE apart, in both buffers (as `gpuwire perf --batch`). */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "ucx_batch_bench: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}

static void xwrite(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) {
            perror("write");
            exit(1);
        }
        c += w;
        n -= (size_t)w;
    }
}

static void xread(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) {
            fprintf(stderr, "ucx_batch_bench: peer went away\n");
            exit(1);
        }
        c += r;
        n -= (size_t)r;
    }
}

static void send_blob(int fd, const void *p, size_t n)
{
    uint64_t len = n;
    xwrite(fd, &len, sizeof(len));
    xwrite(fd, p, n);
}

static void *recv_blob(int fd, size_t *n)
{
    uint64_t len;
    xread(fd, &len, sizeof(len));
    void *p = malloc(len ? len : 1);
    xread(fd, p, len);
    *n = len;
    return p;
}

static void setup(ucp_context_h *ctx, ucp_worker_h *w)
{
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_RMA};
    ucs_status_t st = ucp_init(&p, NULL, ctx);
    if (st != UCS_OK)
        die("ucp_init", st);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE, .thread_mode = UCS_THREAD_MODE_SINGLE};
    if ((st = ucp_worker_create(*ctx, &wp, w)) != UCS_OK)
        die("ucp_worker_create", st);
}

static ucp_mem_h map(ucp_context_h ctx, void *buf, size_t len)
{
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = buf, .length = len};
    ucp_mem_h mh;
    ucs_status_t st = ucp_mem_map(ctx, &mp, &mh);
    if (st != UCS_OK)
        die("ucp_mem_map", st);
    return mh;
}

static void wait_req(ucp_worker_h w, void *req)
{
    if (req == NULL)
        return;
    if (UCS_PTR_IS_ERR(req))
        die("operation", UCS_PTR_STATUS(req));
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS)
        ucp_worker_progress(w);
    ucp_request_free(req);
    if (st != UCS_OK)
        die("request", st);
}

static int target(int fd, size_t len)
{
    ucp_context_h ctx;
    ucp_worker_h w;
    setup(&ctx, &w);
    void *buf = calloc(1, len);
    ucp_mem_h mh = map(ctx, buf, len);
    void *rk;
    size_t rklen;
    ucs_status_t st = ucp_rkey_pack(ctx, mh, &rk, &rklen);
    if (st != UCS_OK)
        die("ucp_rkey_pack", st);
    ucp_address_t *addr;
    size_t alen;
    if ((st = ucp_worker_get_address(w, &addr, &alen)) != UCS_OK)
        die("ucp_worker_get_address", st);
    send_blob(fd, addr, alen);
    send_blob(fd, rk, rklen);
    uint64_t base = (uint64_t)(uintptr_t)buf;
    xwrite(fd, &base, sizeof(base));
    /* progress (UCX's tcp and shared-memory RMA may need the target's worker) until the initiator is done */
    for (unsigned i = 0;; i++) {
        ucp_worker_progress(w);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (!(i & 255) && poll(&p, 1, 0) > 0) /* (a system call per 256 progress calls) */
            break;
    }
    ucp_rkey_buffer_release(rk);
    ucp_worker_release_address(w, addr);
    ucp_mem_unmap(ctx, mh);
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ucx_batch_bench N SIZE SECONDS\n");
        return 2;
    }
    size_t n = strtoul(argv[1], NULL, 0), size = strtoul(argv[2], NULL, 0);
    double secs = strtod(argv[3], NULL);
    size_t len = 2 * n * size;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("socketpair");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        _exit(target(sv[1], len));
    }
    close(sv[1]);
    int fd = sv[0];
    ucp_context_h ctx;
    ucp_worker_h w;
    setup(&ctx, &w);
    uint8_t *buf = malloc(len);
    memset(buf, 7, len);
    ucp_mem_h mh = map(ctx, buf, len);
    size_t alen, rklen;
    void *addr = recv_blob(fd, &alen), *rkb = recv_blob(fd, &rklen);
    uint64_t rbase;
    xread(fd, &rbase, sizeof(rbase));
    ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = addr};
    ucp_ep_h ep;
    ucs_status_t st = ucp_ep_create(w, &ep_p, &ep);
    if (st != UCS_OK)
        die("ucp_ep_create", st);
    ucp_rkey_h rkey;
    if ((st = ucp_ep_rkey_unpack(ep, rkb, &rkey)) != UCS_OK)
        die("ucp_ep_rkey_unpack", st);
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH, .memh = mh};
    ucp_request_param_t fprm = {.op_attr_mask = 0};
    uint64_t batches = 0;
    double t0 = 0;
    for (int phase = 0; phase < 2; phase++) { /* warm-up, then the measurement */
        double end = now() + (phase ? secs : secs / 5);
        uint64_t k = 0;
        t0 = now();
        do {
            for (size_t i = 0; i < n; i++) { /* NIXL's UCX backend: one put per descriptor */
                void *r = ucp_put_nbx(ep, buf + 2 * i * size, size, rbase + 2 * i * size, rkey, &prm);
                if (UCS_PTR_IS_ERR(r))
                    die("ucp_put_nbx", UCS_PTR_STATUS(r));
                if (r)
                    ucp_request_free(r); /* completion is covered by the flush */
            }
            wait_req(w, ucp_worker_flush_nbx(w, &fprm)); /* then one flush, and wait for it */
            k++;
        } while (now() < end);
        batches = k;
    }
    double t = now() - t0;
    printf("ucx %zu %zu %.6f %.1f %llu\n", n, size, (double)(n * size) * (double)batches / t / 1e9,
           (double)n * (double)batches / t, (unsigned long long)batches);
    xwrite(fd, "q", 1);
    ucp_rkey_destroy(rkey);
    void *cr = ucp_ep_close_nbx(ep, &fprm);
    if (cr && !UCS_PTR_IS_ERR(cr)) {
        while (ucp_request_check_status(cr) == UCS_INPROGRESS)
            ucp_worker_progress(w);
        ucp_request_free(cr);
    }
    int status;
    waitpid(pid, &status, 0);
    ucp_mem_unmap(ctx, mh);
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    free(addr);
    free(rkb);
    free(buf);
    return 0;
}
