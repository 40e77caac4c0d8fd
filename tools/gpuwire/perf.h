/* SPDX-License-Identifier: Apache-2.0 */
/* perf.h - `gpuwire perf`: shared pieces of the client (initiator) and the
 * server (target): options, the control protocol, the data pattern.
 *
 * Control protocol: small tagged messages (PERF_TAG_CTRL) in both directions,
 * each a 64-byte little-endian header and an optional blob (a packed rkey).
 * The client drives: HELLO (op, window, largest size, its rkey) -> HELLO
 * reply (the server's rkey, and in `seed` perf_gpu_id() of its buffer); then per size and phase BEGIN -> ack, the
 * measurement, END -> ack carrying the server's CPU time and check result;
 * finally QUIT -> ack.  Data messages of --op send use PERF_TAG_DATA.
 *
 * Buffers: each side registers 2 * max_size bytes with remote read+write.
 * Zone 0 ([0, max)) is where the initiator sends from and where the target
 * receives; zone 1 ([max, 2*max)) is where the initiator receives (gets,
 * pongs) so that --check tests both directions. */
#ifndef GW_TOOL_PERF_H
#define GW_TOOL_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuwire.h"

#define PERF_DEFAULT_PORT 18515 /* perftest's default, for muscle memory */
#define PERF_TAG_CTRL 0x6770657266000001ull /* "gperf" .. 1 */
#define PERF_TAG_DATA 0x6770657266000002ull
#define PERF_CTRL_HDR 64
#define PERF_CTRL_MAX 4096
#define PERF_CTRL_TIMEOUT_MS 120000
#define PERF_MAX_WINDOW 1024

typedef enum perf_op { PERF_PUT = 0, PERF_GET, PERF_SEND, PERF_PUT_NOTIFY } perf_op_t;

typedef enum perf_msg_type {
    PERF_MSG_HELLO = 1,
    PERF_MSG_BEGIN,
    PERF_MSG_END,
    PERF_MSG_QUIT,
    PERF_MSG_REPLY
} perf_msg_type_t;

typedef enum perf_phase { PERF_PHASE_IDLE = 0, PERF_PHASE_LAT, PERF_PHASE_BW } perf_phase_t;

typedef struct perf_msg {
    uint16_t type;
    uint16_t phase;
    uint32_t op;
    uint64_t size;   /* HELLO: largest size; BEGIN: this size */
    uint64_t seed;   /* pattern seed, 0 when not checking */
    uint64_t a, b;   /* BEGIN: spin budget in ns (UINT64_MAX: never sleep);
                        END: ops the client completed; END reply: cpu ns, wall ns */
    uint32_t window; /* HELLO */
    uint32_t flags;  /* PERF_F_* */
    int32_t status;  /* reply: GW_OK, or why the request failed / the check failed */
    uint32_t bloblen;
    const uint8_t *blob;
} perf_msg_t;

enum {
    PERF_F_CHECK = 1u << 1,
    PERF_F_ALLOC = 1u << 2, /* HELLO: target buffer from gw_mem_alloc */
    PERF_F_HUGE = 1u << 3,  /* HELLO: target host buffer in transparent huge pages */
    PERF_F_SPIN_AUTO = 1u << 4 /* BEGIN: the spin budget was chosen by CPU count; the server
                                  does not spin either when its machine has one CPU */
};

typedef struct perf_opts {
    int server;
    int loopback;
    const char *target; /* HOST[:PORT] */
    const char *bind;   /* server: listen address host part */
    unsigned port;
    perf_op_t op;
    uint64_t *sizes;
    size_t nsizes;
    long iters;      /* > 0: fixed count per phase */
    double duration; /* seconds per phase when iters == 0 */
    int window;
    int json;
    int check;
    int busy_poll;   /* never sleep on the context fd */
    int wait;        /* client: latency-phase waits by gw_request_wait(), not its own loop */
    long spin_us;    /* spin this long without events before sleeping on the fd; -1: auto */
    int peer_pid;    /* --loopback: the server process (its CPU time is not "other load") */
    int reference;   /* --reference: memcpy and pipe ping-pong figures of this machine after the table */
    int no_lat, no_bw;
    int once;        /* server: serve one client, then exit */
    int addr_fd;     /* server: write the bound address here (loopback), -1 otherwise */
    int mem_dev;     /* --mem: -1 host memory, else the CUDA device of this side's buffer */
    long batch;      /* --batch N: each operation is one batch of N descriptors of --size (0: off) */
    int pages;       /* --pages: the paged form (gw_xfer_pages) instead of descriptor lists */
    int indices;     /* --indices: lists selected by index arrays 0..N-1, not all entries (NULL) */
    int alloc;       /* --alloc: both buffers from gw_mem_alloc (shared with local peers) */
    int huge;        /* --hugepages: host buffers in 2 MiB-aligned transparent huge pages */
    const char *name; /* server: serve as this agent (gw_agent_listen; registered in GPUWIRE_DIRECTORY) */
    const char *peer; /* client: reach this agent by name (gw_peer_ep) instead of HOST:PORT */
    long table;       /* --table N: descriptor tables of N entries, build and post cost (perf_kv.c) */
    long select;      /* --select K: entries each --table transfer selects (0: min(N, 327680)) */
    int reg;          /* --reg: registration time per GiB by memory kind (perf_kv.c) */
} perf_opts_t;

/* This side's buffer: host memory, or CUDA device memory (through the
 * run-time driver; the pattern is written and checked by copies). */
typedef struct perf_buf {
    uint8_t *p;
    size_t len;
    int dev; /* -1: host */
    int shm; /* from gw_mem_alloc: gw_mem_dereg frees it */
    void *map;     /* huge: the mapping holding p (munmap'ed on free) */
    size_t maplen;
    gw_context_t *tick; /* set: zeroing host memory (the first touch of an allocation included)
                           progresses it every 64 MiB, so a peer on another host waiting on
                           this side meanwhile sees it alive */
} perf_buf_t;
/* 0, or -1 with the reason printed.  huge: a host buffer starts on a 2 MiB
 * boundary in a mapping advised MADV_HUGEPAGE (for measuring without the
 * page-walk cost of 4 KiB pages; a warning if the kernel has THP off). */
int perf_buf_alloc(perf_buf_t *b, size_t len, int dev, int huge);
void perf_buf_free(perf_buf_t *b);
void perf_buf_fill(perf_buf_t *b, size_t off, size_t len, uint64_t seed);
void perf_buf_zero(perf_buf_t *b, size_t off, size_t len);
long long perf_buf_verify(perf_buf_t *b, size_t off, size_t len, uint64_t seed);
/* "--mem host|cuda|cuda:N" -> -1 / N; -2 when malformed. */
int perf_parse_mem(const char *s);

const char *perf_op_name(perf_op_t op);
int perf_parse_op(const char *s, perf_op_t *op);
/* "S", "MIN:MAX" (powers of two from MIN to MAX, MAX included), "A,B,C". */
int perf_parse_sizes(const char *s, uint64_t **out, size_t *n);
void perf_format_size(uint64_t v, char *buf, size_t len);

/* Encodes msg into buf (PERF_CTRL_MAX bytes); returns the length. */
size_t perf_msg_encode(const perf_msg_t *msg, uint8_t *buf);
/* Decodes len bytes; blob points into buf.  -1 when malformed. */
int perf_msg_decode(const uint8_t *buf, size_t len, perf_msg_t *msg);

void perf_fill(void *buf, size_t len, uint64_t seed);
/* First differing offset, or -1. */
long long perf_verify(const void *buf, size_t len, uint64_t seed);

uint64_t perf_now_ns(void);

/* Which GPU of which machine a registered buffer is on: a hash of the
 * machine's boot id and the GPU's PCI bus id, 0 for host memory.  The server
 * returns its own in the HELLO reply (`seed`; older servers send 0), so the
 * client can tell when both processes use one GPU. */
uint64_t perf_gpu_id(gw_mem_t *mem);

/* Waiting for events: spin (progress in a loop) while events come; once none
 * came for spin_ns, sleep on the context fd until one may. */
typedef struct perf_idle {
    uint64_t since;   /* 0: not idle */
    uint64_t spin_ns; /* UINT64_MAX: never sleep */
} perf_idle_t;
/* Call after each progress round; busy: the round found something to do. */
void perf_idle(perf_idle_t *p, gw_context_t *ctx, int busy);
uint64_t perf_cpu_ns(void); /* user + system time of this process */

/* CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota. */
int perf_cpus(void);
/* The spin budget (us) for `spinners` processes that spin on this machine:
 * PERF_SPIN_US when it has more CPUs than that, else 0 (a spinner that shares
 * a CPU with the peer it waits for delays it by a scheduler time slice). */
long perf_auto_spin_us(int spinners);
#define PERF_SPIN_US 200
#define PERF_SPIN_STR "200"

/* perf_ref.c: memcpy bandwidth of `size` bytes in one thread (GB/s), and the
 * one-way latency of a one-byte pipe ping-pong between two processes (us,
 * median); 0 when they could not be measured. */
double perf_ref_memcpy_GBps(size_t size);
double perf_ref_pipe_us(void);

/* What else ran on the machine over an interval: /proc/stat's busy and steal
 * time less the CPU time of this process and of pid (0: none). */
typedef struct perf_load {
    uint64_t busy, steal, own; /* clock ticks */
    uint64_t t_ns;
} perf_load_t;
void perf_load_sample(perf_load_t *l, int pid);
/* CPUs' worth of other processes' time and of steal between a and b. */
void perf_load_diff(const perf_load_t *a, const perf_load_t *b, double *other, double *steal);

/* Requests the side keeps an eye on (replies, pongs): reaped when done. */
typedef struct perf_reqs {
    gw_request_t **r;
    size_t n, cap;
} perf_reqs_t;
int perf_reqs_add(perf_reqs_t *q, gw_request_t *r);
/* Frees the completed ones; returns the first error among them, else GW_OK. */
gw_status_t perf_reqs_reap(perf_reqs_t *q);
void perf_reqs_free(perf_reqs_t *q);

/* A fatal failure of a library call: names the call and gives the detail. */
int perf_fail(gw_context_t *ctx, const char *what, gw_status_t st);

int perf_server(const perf_opts_t *o);
/* perf_kv.c: --table and --reg, measured in this process (two contexts). */
int perf_table(const perf_opts_t *o);
int perf_reg(const perf_opts_t *o);
int perf_client(const perf_opts_t *o, const char *addr);

#endif
