/* SPDX-License-Identifier: Apache-2.0 */
/* ucx_batch_bench.c - the reference for batched puts: what NIXL's UCX
 * backend does for a transfer of N descriptors (one ucp_put_nbx per
 * descriptor, then one ucp_worker_flush_nbx, wait), between two processes on
 * this host over the UCX transports of UCX_TLS.
 *
 * usage: ucx_batch_bench N SIZE SECONDS
 * Prints one line: "ucx N SIZE GB/s descriptors/s batches".  Descriptors are
 * SIZE bytes, one SIZE apart, in both buffers (as `gpuwire perf --batch`).
 *
 * The endpoint is made from the target's worker address (as NIXL does), or,
 * with BENCH_UCX_SOCKADDR=IP, by connecting to a listener of the target's on
 * IP (UCX's client-server mode: its connection manager, rdmacm for an RDMA
 * device, wires the endpoint up).  The second is for Soft-RoCE: UCX's RC
 * transports need an auxiliary UD transport to connect from a worker
 * address, and UCX over rxe's UD hangs (openucx/ucx#4794); the puts and the
 * flush are the same either way. */
#include <arpa/inet.h>
#include <netinet/in.h>
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

/* BENCH_UCX_SOCKADDR's listener: the target accepts the one connection. */
static ucp_ep_h srv_ep;
static void on_conn(ucp_conn_request_h cr, void *arg)
{
    ucp_ep_params_t ep_p = {.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST, .conn_request = cr};
    ucs_status_t st = ucp_ep_create((ucp_worker_h)arg, &ep_p, &srv_ep);
    if (st != UCS_OK)
        die("ucp_ep_create (target, from the connection request)", st);
}

static int target(int fd, size_t len)
{
    ucp_context_h ctx;
    ucp_worker_h w;
    setup(&ctx, &w);
    const char *ip = getenv("BENCH_UCX_SOCKADDR");
    ucp_listener_h lis = NULL;
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
    if (ip && *ip) {
        struct sockaddr_in sa = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
            fprintf(stderr, "ucx_batch_bench: BENCH_UCX_SOCKADDR=%s is not an IPv4 address\n", ip);
            exit(2);
        }
        ucp_listener_params_t lp = {.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
                                    .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof(sa)},
                                    .conn_handler = {.cb = on_conn, .arg = w}};
        if ((st = ucp_listener_create(w, &lp, &lis)) != UCS_OK)
            die("ucp_listener_create", st);
        ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
        if ((st = ucp_listener_query(lis, &la)) != UCS_OK)
            die("ucp_listener_query", st);
        send_blob(fd, &la.sockaddr, sizeof(struct sockaddr_in)); /* IP and port, instead of the worker address */
    } else
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
    if (srv_ep) {
        ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
        void *cr = ucp_ep_close_nbx(srv_ep, &cp);
        while (cr && !UCS_PTR_IS_ERR(cr) && ucp_request_check_status(cr) == UCS_INPROGRESS)
            ucp_worker_progress(w);
        if (cr && !UCS_PTR_IS_ERR(cr))
            ucp_request_free(cr);
    }
    if (lis)
        ucp_listener_destroy(lis);
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
    const char *ip = getenv("BENCH_UCX_SOCKADDR");
    if (ip && *ip) /* the target sent its listener's address */
        ep_p = (ucp_ep_params_t){.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR,
                                 .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
                                 .sockaddr = {.addr = (struct sockaddr *)addr, .addrlen = (socklen_t)alen}};
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
