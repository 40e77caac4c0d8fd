/* SPDX-License-Identifier: Apache-2.0 */
/* reg_cache.c - the registration cache (GPUWIRE_REG_CACHE), in one process:
 * a target context (its own progress thread) registers, an initiator
 * context puts and gets through the keys; over tcp and intra, with host
 * memory and with GPU memory of the fake driver.
 *  A. a range inside a live registration is found in the cache, and is
 *     still a registration of its own: its bounds and access are enforced,
 *     either may be deregistered first, each key is revoked with its own
 *     registration;
 *  B. what is not found: a range with more access than the registration
 *     around it, a context with the cache off;
 *  C. stale entries (as fabtests checks an MR cache): memory deregistered,
 *     unmapped and mapped again at the same address is registered anew;
 *     GPU memory freed under a live registration and allocated again at the
 *     same address is told apart by the driver's buffer id and registered
 *     anew, and puts land in the new memory. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/cuda_wrap.h"
#include "harness.h"

#define LEN (1u << 20)
#define SUB_OFF 8192u
#define SUB_LEN (64u << 10)

static gw_context_t *T, *I;
static gw_ep_t *ep;
static gw_listener_t *lis;
static gw_ep_t *tep;
static const gw_cuda_t *cu;
/* over verbs a registration found in the cache shares the MRs of the one it
 * lies in: a key of either stays usable until both are deregistered (and a
 * key the NIC refuses fails the queue pair, so the endpoint): the checks of
 * revocation are tcp's and intra's */
static int verbs;

static int cached(gw_mem_t *m)
{
    gw_mem_info_t mi = {.size = sizeof(mi)};
    CHECK_ST(gw_mem_query(m, &mi), GW_OK);
    return strncmp(mi.path, "registration cache:", 19) == 0;
}

static gw_rkey_t *key_of(gw_mem_t *m)
{
    uint8_t b[512];
    size_t n = sizeof(b);
    CHECK_ST(gw_mem_pack_rkey(m, b, &n), GW_OK);
    gw_rkey_t *k = NULL;
    CHECK_ST(gw_rkey_unpack(ep, b, n, &k), GW_OK);
    return k;
}

/* A put of len bytes of pattern seed at raddr through k: its status (at
 * posting or at completion). */
static gw_status_t put(gw_rkey_t *k, uint64_t raddr, size_t len, uint64_t seed)
{
    static uint8_t src[SUB_LEN];
    gwt_fill(src, len, seed);
    gw_request_t *r = NULL;
    gw_status_t st = gw_put(ep, src, len, NULL, raddr, k, &r);
    if (st != GW_OK)
        return st;
    st = gw_request_wait(r, 30000);
    gw_request_free(r);
    return st;
}

/* The bytes at p (host or device) hold pattern seed. */
static int holds(const void *p, size_t len, uint64_t seed, int dev)
{
    static uint8_t want[SUB_LEN], got[SUB_LEN];
    gwt_fill(want, len, seed);
    if (dev)
        CHECK(cu->cuMemcpyDtoH(got, (CUdeviceptr)(uintptr_t)p, len) == CUDA_SUCCESS);
    else
        memcpy(got, p, len);
    return memcmp(want, got, len) == 0;
}

static void case_sub(void *buf, int dev, const char *what)
{
    fprintf(stderr, "A. %s: a range inside a live registration\n", what);
    gw_mem_t *R, *S;
    CHECK_ST(gw_mem_reg(T, buf, LEN, GW_ACCESS_REMOTE_READ | GW_ACCESS_REMOTE_WRITE, &R), GW_OK);
    CHECK(!cached(R));
    CHECK_ST(gw_mem_reg(T, (char *)buf + SUB_OFF, SUB_LEN, GW_ACCESS_REMOTE_WRITE, &S), GW_OK);
    CHECK(cached(S));
    gw_rkey_t *kr = key_of(R), *ks = key_of(S);
    uint64_t sa = (uint64_t)(uintptr_t)buf + SUB_OFF;
    CHECK_ST(put(ks, sa, SUB_LEN, 11), GW_OK);
    CHECK(holds((char *)buf + SUB_OFF, SUB_LEN, 11, dev));
    /* its own bounds and access, not the registration around it */
    CHECK_ST(put(ks, sa - 16, 64, 12), GW_ERR_OUT_OF_BOUNDS);
    static uint8_t back[64];
    gw_request_t *r = NULL;
    CHECK_ST(gw_get(ep, back, 64, NULL, sa, ks, &r), GW_ERR_ACCESS);
    /* the registration around it goes first: this one still works */
    CHECK_ST(gw_mem_dereg(R), GW_OK);
    if (!verbs)
        CHECK_ST(put(kr, (uint64_t)(uintptr_t)buf, 64, 13), GW_ERR_INVALID_KEY);
    CHECK_ST(put(ks, sa, SUB_LEN, 14), GW_OK);
    CHECK(holds((char *)buf + SUB_OFF, SUB_LEN, 14, dev));
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    if (!verbs)
        CHECK_ST(put(ks, sa, 64, 15), GW_ERR_INVALID_KEY);
    gw_rkey_destroy(kr);
    gw_rkey_destroy(ks);
    /* and the other order: the smaller one first */
    CHECK_ST(gw_mem_reg(T, buf, LEN, GW_ACCESS_REMOTE_WRITE, &R), GW_OK);
    CHECK_ST(gw_mem_reg(T, (char *)buf + SUB_OFF, SUB_LEN, GW_ACCESS_REMOTE_WRITE, &S), GW_OK);
    CHECK(cached(S));
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    kr = key_of(R);
    CHECK_ST(put(kr, sa, SUB_LEN, 16), GW_OK);
    CHECK(holds((char *)buf + SUB_OFF, SUB_LEN, 16, dev));
    gw_rkey_destroy(kr);
    CHECK_ST(gw_mem_dereg(R), GW_OK);
}

static void case_not_found(void *buf)
{
    fprintf(stderr, "B. ranges the cache does not take\n");
    gw_mem_t *R, *S;
    CHECK_ST(gw_mem_reg(T, buf, LEN, GW_ACCESS_REMOTE_READ, &R), GW_OK);
    CHECK_ST(gw_mem_reg(T, (char *)buf + SUB_OFF, SUB_LEN, GW_ACCESS_REMOTE_WRITE, &S), GW_OK);
    CHECK(!cached(S)); /* more access than the registration around it */
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    CHECK_ST(gw_mem_reg(T, (char *)buf + LEN - 64, 128, GW_ACCESS_REMOTE_READ, &S), GW_OK);
    CHECK(!cached(S)); /* reaches past it */
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    CHECK_ST(gw_mem_dereg(R), GW_OK);
    setenv("GPUWIRE_REG_CACHE", "off", 1);
    gw_context_t *c;
    CHECK_ST(gw_context_create(NULL, &c), GW_OK);
    unsetenv("GPUWIRE_REG_CACHE");
    CHECK_ST(gw_mem_reg(c, buf, LEN, GW_ACCESS_REMOTE_READ, &R), GW_OK);
    CHECK_ST(gw_mem_reg(c, (char *)buf + SUB_OFF, SUB_LEN, GW_ACCESS_REMOTE_READ, &S), GW_OK);
    CHECK(!cached(S));
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    CHECK_ST(gw_mem_dereg(R), GW_OK);
    CHECK_ST(gw_context_destroy(c), GW_OK);
}

static void case_stale_host(void)
{
    fprintf(stderr, "C. host memory deregistered, unmapped and mapped again at the same address\n");
    uint8_t *a = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED);
    gw_mem_t *R, *S;
    CHECK_ST(gw_mem_reg(T, a, LEN, GW_ACCESS_REMOTE_WRITE, &R), GW_OK);
    CHECK_ST(gw_mem_dereg(R), GW_OK);
    CHECK(munmap(a, LEN) == 0);
    uint8_t *b = mmap(a, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(b == a);
    CHECK_ST(gw_mem_reg(T, b + SUB_OFF, SUB_LEN, GW_ACCESS_REMOTE_WRITE, &S), GW_OK);
    CHECK(!cached(S)); /* nothing live to find: registered anew */
    gw_rkey_t *k = key_of(S);
    CHECK_ST(put(k, (uint64_t)(uintptr_t)b + SUB_OFF, SUB_LEN, 21), GW_OK);
    CHECK(holds(b + SUB_OFF, SUB_LEN, 21, 0));
    gw_rkey_destroy(k);
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    CHECK(munmap(b, LEN) == 0);
}

static void case_stale_gpu(void)
{
    fprintf(stderr, "C. GPU memory freed under a live registration and allocated again at the same address\n");
    CUdeviceptr d = 0, e = 0;
    CHECK(cu->cuMemAlloc(&d, LEN) == CUDA_SUCCESS);
    gw_mem_t *R, *S;
    CHECK_ST(gw_mem_reg(T, (void *)(uintptr_t)d, LEN, GW_ACCESS_REMOTE_WRITE, &R), GW_OK);
    CHECK(cu->cuMemFree(d) == CUDA_SUCCESS); /* (as a caching allocator returning a segment would) */
    CUdeviceptr held[16];
    int nheld = 0;
    while (nheld < 16) { /* an allocation at the same address */
        CHECK(cu->cuMemAlloc(&e, LEN) == CUDA_SUCCESS);
        if (e == d)
            break;
        held[nheld++] = e;
        e = 0;
    }
    for (int i = 0; i < nheld; i++)
        cu->cuMemFree(held[i]);
    if (e != d) {
        fprintf(stderr, "the fake driver gave no allocation at 0x%llx again in 16 tries: the same-address case "
                        "did not run\n", (unsigned long long)d);
        CHECK(e == d);
        return;
    }
    CHECK_ST(gw_mem_reg(T, (void *)(uintptr_t)(e + SUB_OFF), SUB_LEN, GW_ACCESS_REMOTE_WRITE, &S), GW_OK);
    CHECK(!cached(S)); /* another buffer id: not the registered allocation */
    gw_rkey_t *k = key_of(S);
    CHECK_ST(put(k, e + SUB_OFF, SUB_LEN, 31), GW_OK);
    CHECK(holds((void *)(uintptr_t)(e + SUB_OFF), SUB_LEN, 31, 1));
    gw_rkey_destroy(k);
    CHECK_ST(gw_mem_dereg(S), GW_OK);
    CHECK_ST(gw_mem_dereg(R), GW_OK); /* (the stale one: its memory is gone, deregistering is still fine) */
    cu->cuMemFree(e);
}

int main(void)
{
    gw_config_t tc = {.size = sizeof(tc), .log_level = -1, .progress_thread = GW_PROGRESS_THREAD_ON};
    CHECK_ST(gw_context_create(&tc, &T), GW_OK);
    CHECK_ST(gw_context_create(NULL, &I), GW_OK);
    char addr[128];
    CHECK_ST(gw_listen(T, "127.0.0.1:0", &lis), GW_OK);
    CHECK_ST(gw_listener_addr(lis, addr, sizeof(addr)), GW_OK);
    CHECK_ST(gw_connect(I, addr, &ep), GW_OK);
    CHECK_ST(gw_accept(lis, 30000, &tep), GW_OK);
    gw_ep_info_t info = {.size = sizeof(info)};
    CHECK_ST(gw_ep_query(ep, &info), GW_OK);
    fprintf(stderr, "over %s\n", info.transport);
    verbs = !strcmp(info.transport, "verbs");
    void *h = malloc(LEN);
    CHECK(h != NULL);
    memset(h, 0, LEN);
    case_sub(h, 0, "host memory");
    case_not_found(h);
    case_stale_host();
    char why[256];
    cu = gw_cuda_get(why, sizeof(why));
    if (!cu || !gw_cuda_ctx_for_device(0, why, sizeof(why))) {
        fprintf(stderr, "GPU cases: no CUDA driver (%s): run with GPUWIRE_CUDA_LIB set to the fake driver\n", why);
        CHECK(cu != NULL);
    } else {
        CUdeviceptr d;
        CHECK(cu->cuMemAlloc(&d, LEN) == CUDA_SUCCESS);
        case_sub((void *)(uintptr_t)d, 1, "GPU memory");
        cu->cuMemFree(d);
        case_stale_gpu();
    }
    free(h);
    CHECK_ST(gw_ep_close(ep, 5000), GW_OK);
    CHECK_ST(gw_ep_close(tep, 5000), GW_OK);
    gw_listener_destroy(lis);
    CHECK_ST(gw_context_destroy(I), GW_OK);
    CHECK_ST(gw_context_destroy(T), GW_OK);
    return gwt_done("reg_cache");
}
