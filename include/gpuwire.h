/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuwire.h - the whole public API of libgpuwire.
 *
 * libgpuwire moves memory (host or GPU) between processes and machines with
 * one-sided put/get, put with a notification, and tagged send/recv.  It picks
 * the fastest transport both sides can use (verbs, intra-host, tcp), agrees
 * on it in a handshake, and tells you which one it took and why.
 *
 * Object model and lifetimes (parents outlive children):
 *
 *     gw_context_t ──┬── gw_mem_t        (registered memory region)
 *                    ├── gw_listener_t   (accepts endpoints)
 *                    └── gw_ep_t ─────── gw_rkey_t (remote key unpacked on it)
 *                                 └───── gw_request_t (one operation)
 *
 *  - gw_context_destroy() returns GW_ERR_BUSY while any endpoint, listener or
 *    memory region of it is alive, and leaves everything untouched.
 *  - gw_mem_dereg() returns GW_ERR_BUSY while a local operation still reads or
 *    writes the region.  Once it returns GW_OK, every remote key packed from the
 *    region is revoked: a later remote put/get through it fails with
 *    GW_ERR_INVALID_KEY at the initiator and the memory is not touched.
 *  - gw_ep_close() first lets outstanding operations finish (up to its
 *    timeout), fails the rest with GW_ERR_CANCELED, then frees the endpoint.
 *    It returns GW_ERR_BUSY while remote keys unpacked on it are alive.
 *  - A request belongs to the caller until gw_request_free(); its status stays
 *    readable after its endpoint is gone.
 *  - When a peer exits or closes, what it sent that completed at its side
 *    before it went is still delivered: the endpoint fails (GW_ERR_CONN_RESET)
 *    only after the transport has drained what had already arrived.
 *  - Every destroy/close/free function accepts NULL and does nothing.
 *
 * Threading: by default a context and everything under it must be used by
 * one thread at a time (the caller serialises), and nothing moves unless that
 * thread calls in: a target must keep calling gw_progress() (or a waiting
 * call) for its peers' operations to be served and their liveness pings to
 * be answered.  Different contexts are independent.
 *
 * Progress thread (gw_config_t.progress_thread, GPUWIRE_PROGRESS_THREAD=on):
 * the context runs a thread of its own that progresses it whenever no
 * application thread does, and blocks on the context's fds and timers (it
 * wakes at least every 10 ms) when there is nothing to do.  A process busy
 * elsewhere (a decode step, a sleep) then still serves puts, gets, batches,
 * messages and notifications on every transport, and its peers never
 * declare it dead.  Every public call on the context and its objects then
 * takes the context's lock, so any thread may make any call, and several
 * threads may wait at once (a waiting call lets go of the lock while it
 * sleeps, and between passes when another thread asks for it).  The rules
 * that stay with the caller: an object is not destroyed (gw_ep_close,
 * gw_mem_dereg, gw_request_free...) while another thread still uses it, and
 * gw_context_destroy() is called once nothing else uses the context.
 * gw_last_error() then returns a copy (valid until the calling thread's next
 * gw_last_error()) of the context's latest detail, which may be another
 * thread's failure; a request's own detail is gw_request_info()'s.
 * gw_peer_watch() callbacks never run on the progress thread: it leaves the
 * events to an application thread's next progress call.  gw_context_fd()
 * becomes readable when the thread made progress (requests may have
 * completed).  A context is not used across fork().  docs/PROGRESS.md has
 * the details and the cost.
 *
 * Errors: every function returns a gw_status_t.  GW_OK is 0, GW_INPROGRESS is
 * 1, errors are negative.  gw_status_str() names a status; gw_last_error()
 * gives the detail of the context's most recent failure (what failed, on which
 * object, why, with what input).
 *
 * Settings are GPUWIRE_* environment variables read at gw_context_create();
 * `gpuwire info` lists each with its value and help.  The main ones:
 *   GPUWIRE_TRANSPORTS        allowed transports, in preference order (default "verbs,intra,tcp")
 *   GPUWIRE_TCP_STREAMS       tcp connections per endpoint that stripe large transfers
 *   GPUWIRE_PEER_TIMEOUT_MS   how long a silent peer may stay silent before its endpoint fails
 *   GPUWIRE_PROGRESS_THREAD   on: a progress thread per context (see Threading above)
 *   GPUWIRE_INTEGRITY         on: notifying puts carry a CRC32C checked at the target
 *                             ("End-to-end integrity" below)
 *   GPUWIRE_CONNECT_TIMEOUT_MS  connect + handshake limit
 *   GPUWIRE_AUTH_SECRET / GPUWIRE_AUTH_SECRET_FILE   shared secret for HMAC peer authentication
 *   GPUWIRE_LOG_LEVEL         error, warn, info, debug, trace
 *   GPUWIRE_DIRECTORY         etcd://host:port of the names directory ("" : peer-to-peer only)
 *   GPUWIRE_PEERS             name=host:port,... agents known without a directory
 */
#ifndef GPUWIRE_H
#define GPUWIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GW_VERSION_MAJOR 0
#define GW_VERSION_MINOR 1
#define GW_VERSION_PATCH 0
#define GW_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define GW_API __attribute__((visibility("default")))
#else
#define GW_API
#endif

/* ------------------------------------------------------------------------ */
/* Status codes.  Numbers are stable: never renumber, retire as placeholder. */
/* ------------------------------------------------------------------------ */

/* X(name, value, text) */
#define GW_STATUS_MAP(X)                                                                 \
    X(GW_OK, 0, "success")                                                               \
    X(GW_INPROGRESS, 1, "operation in progress")                                         \
    /* -1 .. -19: caller and local resource errors */                                    \
    X(GW_ERR_INVALID, -1, "invalid argument")                                            \
    X(GW_ERR_NOMEM, -2, "out of memory")                                                 \
    X(GW_ERR_UNSUPPORTED, -3, "operation not supported by this transport or memory")     \
    X(GW_ERR_NOT_BUILT, -4, "feature not compiled into this build")                      \
    X(GW_ERR_UNAVAILABLE, -5, "feature not available on this machine")                  \
    X(GW_ERR_BUSY, -6, "object still has live children or outstanding work")             \
    X(GW_ERR_TIMEOUT, -7, "timed out")                                                   \
    X(GW_ERR_CANCELED, -8, "operation canceled")                                         \
    X(GW_ERR_TRUNCATED, -9, "message longer than the receive buffer (truncated)")        \
    X(GW_ERR_SYSTEM, -10, "system call failed")                                          \
    X(GW_ERR_NO_RESOURCE, -11, "out of a limited resource")                              \
    X(GW_ERR_MEMLOCK, -12, "locked-memory limit too small for the registration")         \
    X(GW_ERR_NOT_FOUND, -13, "no such object or device")                                 \
    X(GW_ERR_CUDA, -14, "CUDA driver call failed")                                       \
    X(GW_ERR_VERBS, -15, "verbs call failed")                                            \
    X(GW_ERR_CONFIG, -16, "invalid setting")                                             \
    X(GW_ERR_INTEGRITY, -17, "data integrity check failed (checksum mismatch)")          \
    /* -20 .. -39: remote access errors (the target refused; memory untouched) */        \
    X(GW_ERR_OUT_OF_BOUNDS, -20, "remote access outside the registered region")          \
    X(GW_ERR_ACCESS, -21, "remote access not permitted by the region's access flags")    \
    X(GW_ERR_INVALID_KEY, -22, "remote key unknown, malformed or revoked")               \
    /* -40 .. -59: connection and endpoint errors (UCS_IS_ENDPOINT_ERROR style) */       \
    X(GW_ERR_CONN_REFUSED, -40, "connection refused")                                    \
    X(GW_ERR_CONN_RESET, -41, "connection to the peer lost")                             \
    X(GW_ERR_PEER_TIMEOUT, -42, "peer stopped answering")                                \
    X(GW_ERR_PROTOCOL, -43, "malformed or unexpected message from the peer")             \
    X(GW_ERR_VERSION, -44, "peer speaks an incompatible protocol version")               \
    X(GW_ERR_AUTH, -45, "peer authentication failed")                                    \
    X(GW_ERR_NO_TRANSPORT, -46, "no transport usable by both sides")                     \
    X(GW_ERR_ENDPOINT_FAILED, -47, "endpoint failed earlier; see its first error")       \
    X(GW_ERR_ADDRESS, -48, "cannot resolve or bind the address")

typedef enum gw_status {
#define GW_STATUS_ENUM_(name, value, text) name = (value),
    GW_STATUS_MAP(GW_STATUS_ENUM_)
#undef GW_STATUS_ENUM_
} gw_status_t;

/* True for errors that mean the endpoint is unusable. */
#define GW_IS_ENDPOINT_ERROR(s) ((s) <= -40 && (s) > -60)

/* Name of a status ("invalid argument"); never NULL, also for unknown values. */
GW_API const char *gw_status_str(gw_status_t status);
/* Symbol of a status ("GW_ERR_INVALID"); never NULL. */
GW_API const char *gw_status_name(gw_status_t status);

/* ------------------------------------------------------------------------ */
/* Opaque objects                                                           */
/* ------------------------------------------------------------------------ */
typedef struct gw_context gw_context_t;
typedef struct gw_mem gw_mem_t;
typedef struct gw_listener gw_listener_t;
typedef struct gw_ep gw_ep_t;
typedef struct gw_rkey gw_rkey_t;
typedef struct gw_request gw_request_t;

/* ------------------------------------------------------------------------ */
/* Version and build                                                        */
/* ------------------------------------------------------------------------ */
/* Library version string, e.g. "0.1.0". */
GW_API const char *gw_version(void);
/* Space-separated list of features compiled in, e.g. "tcp verbs cuda auth". */
GW_API const char *gw_build_features(void);

/* ------------------------------------------------------------------------ */
/* Context                                                                  */
/* ------------------------------------------------------------------------ */

/* Extensible: set .size = sizeof(gw_config_t); fields past the caller's size
 * take their defaults.  A NULL config means all defaults. */
typedef struct gw_config {
    size_t size;             /* sizeof(gw_config_t) as the caller compiled it */
    const char *transports;  /* NULL: GPUWIRE_TRANSPORTS or "verbs,intra,tcp" */
    int log_level;           /* -1: GPUWIRE_LOG_LEVEL or warn (0 err .. 4 trace).
                              * Process-wide: the library has one log (stderr or
                              * GPUWIRE_LOG_FILE), and the context created last
                              * with a level sets it for all. */
    /* version 1 ends here */
    /* RDMA device and port this context's verbs transport uses, e.g.
     * "mlx5_0:1"; NULL: GPUWIRE_IB_DEVICE or the nearest active port.  The
     * ofi transport takes the libfabric domain named after the device (EFA:
     * "rdmap16s27:1" -> domain rdmap16s27-rdm).  Lets one process hold a
     * context per NIC (the NCCL plugin does). */
    const char *ib_device;
    /* version 2 ends here */
    /* GW_PROGRESS_THREAD_ON: this context runs its own progress thread (see
     * Threading at the top); GW_PROGRESS_THREAD_OFF: it does not;
     * GW_PROGRESS_THREAD_DEFAULT (0, what a zeroed config holds):
     * GPUWIRE_PROGRESS_THREAD decides (default off). */
    int progress_thread;
    /* version 3 ends here */
    /* GW_INTEGRITY_ON: the endpoints of this context check every notifying
     * put end to end (CRC32C; see "End-to-end integrity" below);
     * GW_INTEGRITY_OFF: this side does not ask for it (the peer still may);
     * GW_INTEGRITY_DEFAULT (0): GPUWIRE_INTEGRITY decides (default off). */
    int integrity;
    /* version 4 ends here */
} gw_config_t;
enum { GW_PROGRESS_THREAD_DEFAULT = 0, GW_PROGRESS_THREAD_ON = 1, GW_PROGRESS_THREAD_OFF = -1 };
enum { GW_INTEGRITY_DEFAULT = 0, GW_INTEGRITY_ON = 1, GW_INTEGRITY_OFF = -1 };

/* Creates a context: reads settings (GPUWIRE_PEERS and GPUWIRE_DIRECTORY
 * included), opens the transports usable here (an absent optional
 * dependency is noted, not an error).  Errors: GW_ERR_INVALID (NULL out, bad
 * config size), GW_ERR_CONFIG (a setting does not parse; the message, naming
 * the variable and its value, is written to stderr since no context exists),
 * GW_ERR_NOMEM. */
GW_API gw_status_t gw_context_create(const gw_config_t *config, gw_context_t **out);

/* Destroys a context.  GW_ERR_BUSY (and nothing is freed) while endpoints,
 * listeners or memory regions of it are alive. */
GW_API gw_status_t gw_context_destroy(gw_context_t *ctx);

/* Detail of the most recent failure in this context, "" if none.  Valid until
 * the next call on the context (with a progress thread: a copy, valid until
 * the calling thread's next gw_last_error(), of the context's latest detail,
 * which may be another thread's).  Every refusal with GW_ERR_INVALID of a call
 * that was given an object of the context sets it, naming the function and
 * the argument. */
GW_API const char *gw_last_error(const gw_context_t *ctx);

/* Runs the progress engine once without blocking: moves bytes, completes
 * requests, accepts connections.  Returns the number of events processed
 * (>= 0) or a negative status on a context-wide failure. */
GW_API int gw_progress(gw_context_t *ctx);

/* A file descriptor for epoll/poll users: it becomes readable when
 * gw_progress() has work to do.  Owned by the context; do not close or read
 * it.  Before sleeping on it, call gw_progress() until it returns 0.  With a
 * progress thread it becomes readable when the thread made progress
 * (requests may have completed, notifications arrived); gw_progress()
 * clears it. */
GW_API gw_status_t gw_context_fd(gw_context_t *ctx, int *fd);

/* Blocks up to timeout_ms (-1: forever) until there may be progress to make.
 * Convenience over gw_context_fd() + poll(). */
GW_API gw_status_t gw_context_wait(gw_context_t *ctx, int timeout_ms);

/* ------------------------------------------------------------------------ */
/* Memory registration                                                      */
/* ------------------------------------------------------------------------ */
enum {
    GW_ACCESS_LOCAL = 0,             /* only local operations use the region */
    GW_ACCESS_REMOTE_READ = 1u << 0, /* peers may get from it */
    GW_ACCESS_REMOTE_WRITE = 1u << 1 /* peers may put into it */
};

typedef enum gw_mem_type {
    GW_MEM_HOST = 0,
    GW_MEM_CUDA = 1
} gw_mem_type_t;

/* Registers [addr, addr+len) for use by operations and, with remote access
 * flags, for peers through a packed remote key.
 *
 * Registration cache (GPUWIRE_REG_CACHE, default on): a range that lies
 * inside a live registration of the context - the same kind of memory,
 * granting at least the access asked for, for GPU memory in the same
 * allocations (the driver's buffer ids tell an allocation freed and made
 * again at the same address from the one registered) - shares what the
 * transports made for that registration (verbs memory regions, intra's CUDA
 * IPC export) instead of registering again: registering a tensor inside a
 * registered PyTorch allocator segment costs a lookup (a few microseconds:
 * the pointer's attributes, a binary search).  gw_mem_query's path then
 * starts "registration cache: inside the registration [addr, +len)".  The
 * new registration is still one of its own: its own id, bounds, access and
 * keys; either may be deregistered first, and over tcp and intra its keys
 * are revoked with it.  Over verbs the shared memory regions stay until
 * the last registration sharing them goes, so a key of one stays usable
 * until then (one-sided access does not ask the target).  Host memory is
 * the caller's to keep mapped while registered: memory unmapped and mapped
 * again under a live registration is not told apart (tcp and intra address
 * it when they copy, so they reach the new pages; a verbs MR keeps the old
 * ones).  `gpuwire perf --reg` prints the cost of registering by memory
 * kind, and of such a lookup.  The memory type is detected
 * from the pointer (CUDA device memory when libcuda is present and the pointer
 * is a device pointer, host otherwise).  len may be 0.  The caller keeps
 * ownership of the memory and must not free it before gw_mem_dereg().
 * Errors: GW_ERR_INVALID (NULL addr with len > 0, unknown flags),
 * GW_ERR_MEMLOCK (locked-memory limit; the detail names the limit and the
 * fix), GW_ERR_CUDA, GW_ERR_VERBS, GW_ERR_NOMEM. */
GW_API gw_status_t gw_mem_reg(gw_context_t *ctx, void *addr, size_t len, unsigned access,
                              gw_mem_t **out);

/* Deregisters and revokes every remote key of the region.  GW_ERR_BUSY while
 * a local operation still uses it (nothing changes then).  On GW_OK nothing
 * lands in the region any more, over every transport save ofi's shm provider
 * (it checks no key: docs/OFI.md): a peer's put through
 * a revoked key that arrives later is refused (GW_ERR_INVALID_KEY at the
 * peer; over verbs and ofi over tcp its endpoint fails), and one being
 * copied in is waited for (over ofi's tcp provider, a region peers may
 * write waits for a round trip to each connected peer; one that does not
 * answer within GPUWIRE_PEER_TIMEOUT_MS has its endpoint failed).  The
 * memory is the caller's to reuse or free. */
GW_API gw_status_t gw_mem_dereg(gw_mem_t *mem);

/* Allocates len bytes of zeroed host memory and registers them as by
 * gw_mem_reg(ctx, *addr, len, access, mem): the same keys, bounds, access
 * and revocation rules.  The memory is shared with peers on this host (a
 * memfd they map when they first use its key), so the intra-host transport
 * moves puts and gets into it by plain copies from the initiator: no system
 * call and no message per operation.  Its pages are allocated and mapped at
 * once (as registration pins memory), not on first touch.  Other transports treat it as any
 * registered host memory.  gw_mem_dereg() revokes and frees it: the caller
 * must not touch *addr after.  Errors: GW_ERR_INVALID (len 0, unknown flags),
 * GW_ERR_NOMEM, GW_ERR_SYSTEM (memfd_create/mmap failed). */
GW_API gw_status_t gw_mem_alloc(gw_context_t *ctx, size_t len, unsigned access, void **addr,
                                gw_mem_t **mem);

typedef struct gw_mem_info {
    size_t size;           /* sizeof(gw_mem_info_t), set by the caller */
    void *addr;
    size_t len;
    unsigned access;
    gw_mem_type_t type;
    int cuda_device;       /* CUDA ordinal, -1 for host memory */
    char pci_bus_id[16];   /* of the GPU, "" for host memory */
    /* How each transport can reach the region, one line each, with the
     * reason for every downgrade, e.g. "verbs: staging (dma-buf: ...; peermem: ...)". */
    char path[512];
} gw_mem_info_t;

GW_API gw_status_t gw_mem_query(const gw_mem_t *mem, gw_mem_info_t *info);

/* Packs the region's remote key into buf.  Call with buf == NULL to learn
 * the size in *len.  GW_ERR_INVALID if *len is too small (then *len is the
 * size needed) or the region grants no remote access.  The blob is
 * self-describing (magic, version) and safe to send anywhere. */
GW_API gw_status_t gw_mem_pack_rkey(const gw_mem_t *mem, void *buf, size_t *len);

/* Unpacks a remote key received from the peer of ep.  Errors:
 * GW_ERR_INVALID_KEY (malformed, wrong magic/version, a malformed part for
 * the endpoint's transport, or not from this endpoint's peer). */
GW_API gw_status_t gw_rkey_unpack(gw_ep_t *ep, const void *buf, size_t len, gw_rkey_t **out);
GW_API void gw_rkey_destroy(gw_rkey_t *rkey);

/* Remote address range an rkey covers (as the owner registered it). */
GW_API gw_status_t gw_rkey_range(const gw_rkey_t *rkey, uint64_t *addr, size_t *len);

/* ------------------------------------------------------------------------ */
/* Endpoints                                                                */
/* ------------------------------------------------------------------------ */

/* Listens on "host:port", ":port", "[v6]:port" (port 0 picks one).  The
 * listener accepts and handshakes during gw_progress(). */
GW_API gw_status_t gw_listen(gw_context_t *ctx, const char *addr, gw_listener_t **out);
/* The bound address as "host:port". */
GW_API gw_status_t gw_listener_addr(const gw_listener_t *l, char *buf, size_t len);
/* Takes the next endpoint whose handshake completed and whose further
 * connections (tcp streams) all arrived.  timeout_ms: 0 returns
 * GW_INPROGRESS at once when none is ready; -1 waits forever; otherwise
 * GW_ERR_TIMEOUT when it expires.  Handshakes that fail are logged and
 * counted; the listener keeps serving others.  An accepted endpoint no
 * longer needs its listener. */
GW_API gw_status_t gw_accept(gw_listener_t *l, int timeout_ms, gw_ep_t **out);
/* Closes the listener and the endpoints it has not handed out yet; those
 * gw_accept() returned are not affected. */
GW_API void gw_listener_destroy(gw_listener_t *l);

/* Connects to "host:port" and completes the handshake (blocking, bounded by
 * GPUWIRE_CONNECT_TIMEOUT_MS; progress of other endpoints continues).
 * Errors: GW_ERR_ADDRESS, GW_ERR_CONN_REFUSED, GW_ERR_TIMEOUT,
 * GW_ERR_VERSION, GW_ERR_PROTOCOL, GW_ERR_AUTH, GW_ERR_NO_TRANSPORT. */
GW_API gw_status_t gw_connect(gw_context_t *ctx, const char *addr, gw_ep_t **out);

/* Closes gracefully: waits up to timeout_ms (-1 forever) for outstanding
 * operations, fails the rest with GW_ERR_CANCELED, tells the peer, frees the
 * endpoint.  GW_ERR_BUSY (nothing done) while rkeys unpacked on it live. */
GW_API gw_status_t gw_ep_close(gw_ep_t *ep, int timeout_ms);

typedef struct gw_ep_info {
    size_t size;            /* sizeof(gw_ep_info_t), set by the caller */
    char transport[16];     /* "tcp", "verbs", "intra" */
    char peer[64];          /* peer address "host:port" */
    char path[256];         /* e.g. "tcp: 4 streams" or "verbs rxe0:1 gid 1 mtu 1024" */
    char downgrades[512];   /* why better transports were not taken, "" if none */
    gw_status_t error;      /* first error of the endpoint, GW_OK if healthy */
    /* version 1 ends here */
    char error_detail[384]; /* what the first error was, e.g. "no data from peer ... for 10000 ms" */
} gw_ep_info_t;

GW_API gw_status_t gw_ep_query(const gw_ep_t *ep, gw_ep_info_t *info);

/* ------------------------------------------------------------------------ */
/* Operations.  All are non-blocking.  On GW_OK *req (when req != NULL) holds
 * a request to test/wait/free; pass req == NULL to not track the operation
 * (its errors then surface on the endpoint and in the next gw_flush()).
 * The local buffer must stay valid until the request completes.  An
 * untracked send of a message that goes whole (up to the transport's eager
 * size: 16 KiB and more) takes a copy before gw_send() returns over tcp,
 * intra, verbs and ofi's header path, so its buffer may be reused at once;
 * a larger one (and one on ofi's tagged path or over an FI_MR_LOCAL
 * provider) is read until the peer has it: keep that buffer unchanged
 * until a send posted after it on the same endpoint completes (sends leave
 * in posting order).  lmem may be
 * NULL for host memory; it must be given for GPU memory.
 * Completion means: put - the data is in the target's memory; get - the data
 * is in the local buffer; send - the peer has the message; recv - the
 * message is in the buffer.
 * A stopped peer (not calling progress): over intra, puts, gets and flushes
 * of them still complete (the data moves without the peer process); over
 * tcp they wait for the peer, and fail with GW_ERR_PEER_TIMEOUT after
 * GPUWIRE_PEER_TIMEOUT_MS.  Messages and notifications need the peer on
 * every transport.  A peer on the same host that is merely busy with local
 * work (allocating and touching buffers, registering, computing) is never
 * declared dead however long it works: past the timeout its process state
 * decides (running or sleeping: waited for; stopped, traced or gone: dead).
 * A peer on another host must call progress at least once per timeout
 * while this side waits on it.  docs/DESIGN.md, "Peer liveness", has the
 * table.  A peer whose context runs the progress thread (Threading, at the
 * top) is served by it: its puts, gets, messages and notifications
 * complete however long its application is busy elsewhere, on every
 * transport, and it answers liveness pings.
 * Errors at posting: GW_ERR_INVALID, GW_ERR_OUT_OF_BOUNDS / GW_ERR_ACCESS
 * (checked against the rkey before anything is sent), GW_ERR_ENDPOINT_FAILED.
 * ------------------------------------------------------------------------ */
GW_API gw_status_t gw_put(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *lmem,
                          uint64_t raddr, gw_rkey_t *rkey, gw_request_t **req);
GW_API gw_status_t gw_get(gw_ep_t *ep, void *buf, size_t len, gw_mem_t *lmem, uint64_t raddr,
                          gw_rkey_t *rkey, gw_request_t **req);
/* Put, then deliver `value` to the target's notification queue after the
 * data of this put and of every put posted before it on this endpoint is in
 * the target's memory.  Notifications arrive in posting order.  The request
 * completes when the notification is sent, so its completion also means
 * that every earlier put (tracked or not) has landed: a get posted after it
 * reads their data (every transport).  The ordering is with earlier puts
 * (and gets) only, never with messages: a notification is not held behind
 * an earlier gw_send the peer has not received yet (on every transport),
 * so a target may wait for the notification before it posts the receive.
 * A put_notify that fails (the target refused it, the endpoint failed)
 * delivers no notification. */
GW_API gw_status_t gw_put_notify(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *lmem,
                                 uint64_t raddr, gw_rkey_t *rkey, uint64_t value,
                                 gw_request_t **req);
/* Takes the oldest notification received on ep.  timeout_ms as gw_accept().
 * Returns GW_INPROGRESS / GW_ERR_TIMEOUT when none came.  On an endpoint
 * that checks integrity (below), a notification whose data failed the
 * check is taken and reported as GW_ERR_INTEGRITY instead (*value is its
 * value; gw_last_error() names the entry). */
GW_API gw_status_t gw_notify_wait(gw_ep_t *ep, int timeout_ms, uint64_t *value);

/* Tagged messages of any size.  On an endpoint that checks integrity the
 * tag 0x6777696e74656772 is the check's own (gw_send refuses it, receives
 * never match it).  A receive matches the oldest message on ep
 * with (msg_tag & mask) == (tag & mask), oldest in the order the peer sent
 * them: one whose bytes are still arriving is not passed over (the receive
 * waits for it).  Messages that arrive before their receive are kept.  When
 * several posted receives match an arriving message, the earliest posted
 * one takes it (a promise, on every transport).  A message longer than the buffer completes the receive
 * with GW_ERR_TRUNCATED after filling the buffer.  gw_probe() tells a
 * queued message's length and tag before receiving it. */
GW_API gw_status_t gw_send(gw_ep_t *ep, const void *buf, size_t len, gw_mem_t *lmem,
                           uint64_t tag, gw_request_t **req);
GW_API gw_status_t gw_recv(gw_ep_t *ep, void *buf, size_t len, gw_mem_t *lmem, uint64_t tag,
                           uint64_t mask, gw_request_t **req);

/* Completes when every put and get posted on ep before it is complete (puts
 * visible at the target).  Sends are not waited for (one completes when
 * the peer takes the message, which may wait for the peer's receive).  Its
 * status is the first error among untracked operations since the previous
 * flush, else GW_OK. */
GW_API gw_status_t gw_flush(gw_ep_t *ep, gw_request_t **req);

/* ------------------------------------------------------------------------ */
/* Batched and paged transfers (many scattered blocks, one request).         */
/*                                                                          */
/* Descriptor lists are prepared once and reused: a local list names blocks  */
/* of registered local regions, a remote list blocks of the peer's regions   */
/* (through keys unpacked on one endpoint).  Every entry is checked when the */
/* list is prepared (bounds, access, key's endpoint); a bad one is refused   */
/* with its index in gw_last_error().  A transfer pairs entry lidx[i] of the */
/* local list with entry ridx[i] of the remote one (equal lengths), and      */
/* moves them all as one request; the transport does it natively (verbs:    */
/* one chain of work requests; tcp: one frame per run of entries with        */
/* iovecs; intra: iovec arrays for CMA, or, for puts of entries up to 16 KiB */
/* a peer that is polling, a shared ring the peer's progress engine copies   */
/* out of (GPUWIRE_INTRA_RING_WAIT_US; one the peer does not take in time    */
/* moves by CMA, so a stopped peer still gets its puts); GPU memory: a       */
/* gather/scatter kernel where one loads, else copy-engine copies, as        */
/* gw_ep_query's path says).                                                 */
/*                                                                          */
/* A batch put may end with one notification, delivered after every byte of  */
/* the batch is in the target's memory: ORDERED puts the value in the queue  */
/* gw_notify_wait() reads (after every earlier put's data, like              */
/* gw_put_notify); COUNTED adds one to the target's counter of that id, which */
/* gw_notify_count_wait() waits on ("all pages of layer 7 are here": the      */
/* initiators post one counted batch per page set, the target waits for N).  */
/*                                                                          */
/* Failure in mid-batch (a key revoked at the target, the peer gone): the   */
/* request fails with the first error; no notification is delivered; each   */
/* entry of the batch at the target holds either its old bytes, the new      */
/* bytes, or (for the entries that were moving when it failed) a mix of      */
/* both.  Memory outside the batch's entries is never written.  For a get,    */
/* the same holds for the local entries.                                     */
/* ------------------------------------------------------------------------ */
typedef struct gw_dlist gw_dlist_t;

typedef struct gw_local_desc {
    gw_mem_t *mem;      /* registered local region */
    size_t offset;      /* from the region's start */
    size_t len;
} gw_local_desc_t;

typedef struct gw_remote_desc {
    gw_rkey_t *rkey;    /* unpacked on the endpoint the list is prepared for */
    uint64_t offset;    /* from the start of the range the key covers */
    size_t len;
} gw_remote_desc_t;

/* Prepares a local list of n entries (n may be 0; entries of length 0 are
 * allowed).  Every region named stays in use (gw_mem_dereg() returns
 * GW_ERR_BUSY) until gw_dlist_destroy().  Errors: GW_ERR_INVALID (NULL
 * region, region of another context, entry outside its region: the message
 * names the entry's index), GW_ERR_NOMEM. */
GW_API gw_status_t gw_dlist_local(gw_context_t *ctx, const gw_local_desc_t *d, size_t n, gw_dlist_t **out);
/* Prepares a remote list for transfers on ep.  The keys' contents are copied:
 * the caller may destroy the rkeys afterwards; gw_ep_close() returns
 * GW_ERR_BUSY while a remote list of the endpoint lives.  access: the
 * remote access the list will be used for (GW_ACCESS_REMOTE_WRITE for puts,
 * GW_ACCESS_REMOTE_READ for gets, or both).  Errors: GW_ERR_INVALID,
 * GW_ERR_INVALID_KEY (key unpacked on another endpoint), GW_ERR_OUT_OF_BOUNDS,
 * GW_ERR_ACCESS (with the entry's index), GW_ERR_NOMEM. */
GW_API gw_status_t gw_dlist_remote(gw_ep_t *ep, const gw_remote_desc_t *d, size_t n, unsigned access,
                                   gw_dlist_t **out);
/* Tables: the same lists given as columns, for serving-scale tables (a KV
 * cache of 1,000,000 blocks) that are built once from arrays, with no
 * descriptor struct per entry and no search for an entry's region.  Entry i
 * lies in region region[i] of the regions (keys) passed, offset[i] bytes from
 * its start, len[i] bytes long.  Any column may be NULL:
 *   region NULL: every entry is in the first region (or see per_region);
 *   offset NULL: entry i starts at i * len_all;
 *   len NULL:    every entry is len_all bytes;
 *   region and offset both NULL with per_region > 0: entry i is block
 *   i % per_region of region i / per_region (block b at b * len_all) - the
 *   layout "entry = layer region x blocks per region + block" of a paged KV
 *   cache needs no array at all.
 * Checks and errors are those of gw_dlist_local / gw_dlist_remote (the
 * message names the entry's index, its region index and the region), plus
 * GW_ERR_INVALID for a region index past nmems / nkeys.  Every region (key)
 * passed belongs to the list, used by an entry or not.
 *
 * Memory: a computed table (no columns) holds no memory per entry: 8 bytes
 * per region; a table with columns (and a list from gw_dlist_local /
 * gw_dlist_remote) 24 bytes per entry (address, length, region index).
 * Per region a list also keeps a pointer (local) or a copy of the key
 * (remote, 200 bytes).  A transfer builds 32 bytes per selected entry
 * (fewer where entries continue each other and merge; the array is reused
 * by the context's next transfer); the unexpanded GPU form (docs/BATCH.md)
 * adds 16 bytes per entry of the list in pinned host memory and 16 in GPU
 * memory, made on its first use.
 *
 * Cost (docs/PERFORMANCE.md, section 11; `gpuwire perf --table N` measures
 * it on any machine): a computed table of 1,000,000 entries builds in
 * microseconds, one from an offset column in about 30 ms on the 2-core
 * development VM (30 ns per entry).  The part of a transfer's post that
 * depends on the entries selected (index checks, the entry array) costs
 * 6-12 ns per entry with computed tables and 60-120 ns per entry with
 * column tables selected at random (a cache miss per entry): 2-4 ms and
 * 20-40 ms for 327,680 entries.  What the transport does at posting
 * comes on top (tcp sends its first frames, intra copies host memory). */
typedef struct gw_dlist_table {
    size_t size;             /* sizeof(gw_dlist_table_t) as the caller compiled it */
    size_t n;                /* entries (at most 2^32 - 1) */
    const uint32_t *region;  /* n region indices, or NULL */
    const uint64_t *offset;  /* n offsets from the region's start, or NULL */
    const uint64_t *len;     /* n lengths, or NULL */
    uint64_t len_all;        /* the length of every entry when len is NULL */
    uint64_t per_region;     /* blocks per region when region and offset are NULL (0: all in region 0) */
    /* version 1 ends here */
} gw_dlist_table_t;

/* A local list from a table over nmems registered regions of ctx. */
GW_API gw_status_t gw_dlist_local_table(gw_context_t *ctx, gw_mem_t *const *mems, size_t nmems,
                                        const gw_dlist_table_t *table, gw_dlist_t **out);
/* A remote list from a table over nkeys keys unpacked on ep (copied; access
 * as gw_dlist_remote). */
GW_API gw_status_t gw_dlist_remote_table(gw_ep_t *ep, gw_rkey_t *const *rkeys, size_t nkeys,
                                         const gw_dlist_table_t *table, unsigned access, gw_dlist_t **out);
/* Number of entries. */
GW_API size_t gw_dlist_count(const gw_dlist_t *l);
/* GW_ERR_BUSY (nothing done) while a transfer using the list is in progress.
 * Also frees the copies of a GPU list's entries that its first transfer
 * over intra made (pinned host memory and GPU memory: 16 bytes per entry
 * each; docs/BATCH.md). */
GW_API gw_status_t gw_dlist_destroy(gw_dlist_t *l);

enum { GW_XFER_PUT = 0, GW_XFER_GET = 1 };
enum { GW_NOTIFY_NONE = 0, GW_NOTIFY_ORDERED = 1, GW_NOTIFY_COUNTED = 2 };

typedef struct gw_xfer_opts {
    size_t size;        /* sizeof(gw_xfer_opts_t) as the caller compiled it */
    int notify;         /* GW_NOTIFY_*; puts only */
    uint64_t value;     /* ORDERED: the value queued; COUNTED: the id counted */
    /* version 1 ends here */
    /* The end-to-end integrity check of a put with a notification (see
     * "End-to-end integrity" below): GW_INTEGRITY_DEFAULT (0): checked when
     * the endpoint checks; GW_INTEGRITY_OFF: not checked (its notification
     * is delivered as it comes); GW_INTEGRITY_ON: checked, and refused with
     * GW_ERR_UNSUPPORTED on an endpoint that does not check. */
    int integrity;
    /* version 2 ends here */
    /* Where gw_xfer_pages' index arrays (lpages, rpages) live:
     * GW_INDEX_HOST (0): host memory, read during the call.
     * GW_INDEX_DEVICE: uint32 arrays in the memory of the local region's GPU
     * (a block table kept there), read by the GPU and never by the host:
     * they must stay unchanged until the request completes.  The host checks
     * only which pages could be valid on each side (and asks the driver
     * once per allocation the arrays lie in); the GPU checks every entry
     * before anything moves (in the page kernel's own launch where the
     * device takes a cooperative launch, else in a kernel queued before
     * it), and where one is outside its region nothing moves and the
     * request fails with GW_ERR_INVALID naming the first bad entry (no
     * notification is delivered).  Only GPU to peer GPU
     * over the intra-host transport, where the page kernel runs: elsewhere
     * (tcp, verbs, ofi, host memory on either side, no copy kernel, copies
     * in gpuwire's own context, the integrity check, pages spanning several
     * of the peer's allocations) GW_ERR_UNSUPPORTED with the reason, at
     * posting or at completion.  A NULL array (0..count-1) is allowed on
     * either side.  Other calls refuse GW_INDEX_DEVICE (GW_ERR_UNSUPPORTED). */
    unsigned index_mem;
    /* GW_INDEX_DEVICE: a CUstream the arrays are ready on (the transfer's GPU
     * work waits for everything queued on it before the call); NULL: they
     * are ready now. */
    void *index_stream;
    /* version 3 ends here */
    /* The item type of gw_xfer_pages' and gw_xfer_batch's index arrays in
     * host memory (both arrays: lpages/rpages, lidx/ridx): GW_INDEX_U32 (0):
     * uint32_t, as the prototypes say; GW_INDEX_I64 / GW_INDEX_U64: int64_t
     * / uint64_t (cast to const uint32_t *), what NumPy and torch give by
     * default; GW_INDEX_I32: int32_t, negative items refused.  Every item
     * must lie in 0 .. 2^32-1: one outside fails the call (GW_ERR_INVALID
     * naming the array, the position and the value; nothing moves).  Over
     * intra between GPUs the items are narrowed and checked in the pinned
     * copy the transport makes anyway, in the same pass (no extra one);
     * elsewhere the call narrows them into a temporary array first (int32:
     * checks them where they are).  GW_INDEX_I64 / GW_INDEX_U64 are refused
     * (GW_ERR_INVALID) with GW_INDEX_DEVICE, any type but GW_INDEX_U32 by
     * the prepared forms, whose arrays are their own.  gw_xfer_opts_size()
     * says whether the library reads this field. */
    unsigned index_type;
    /* version 4 ends here */
} gw_xfer_opts_t;

enum { GW_INDEX_HOST = 0, GW_INDEX_DEVICE = 1 };
enum { GW_INDEX_U32 = 0, GW_INDEX_I64 = 1, GW_INDEX_U64 = 2, GW_INDEX_I32 = 3 };

/* sizeof(gw_xfer_opts_t) as this library was built: a caller compiled
 * against a newer header (or a binding loading the library at run time)
 * learns which fields it reads (those that end at or below this size). */
GW_API size_t gw_xfer_opts_size(void);

/* Moves count entry pairs as one request: op GW_XFER_PUT writes local entry
 * lidx[i] into remote entry ridx[i], GW_XFER_GET reads the other way.  lidx
 * or ridx NULL means 0..count-1; with both NULL, a later transfer of the
 * same two lists and count reuses the entries this one built (no work per
 * entry at posting).  count 0 is a valid empty batch (it still
 * delivers its notification, after every earlier put).  opts may be NULL (no
 * notification).  Completion: every byte is in place (put: in the target's
 * memory; get: in the local entries).  Entries may overlap or repeat; where
 * two entries of one put write the same remote bytes, which one wins is not
 * defined (with GPU memory the bytes of both may mix).  Errors at posting: GW_ERR_INVALID (index out of range, lengths
 * differ, list of another endpoint/context: the message names i),
 * GW_ERR_ACCESS (remote list prepared without the access op needs),
 * GW_ERR_ENDPOINT_FAILED. */
GW_API gw_status_t gw_xfer_batch(gw_ep_t *ep, int op, gw_dlist_t *local, const uint32_t *lidx,
                                 gw_dlist_t *remote, const uint32_t *ridx, size_t count,
                                 const gw_xfer_opts_t *opts, gw_request_t **req);

/* The paged form (KV caches): page i of the batch is the page_size bytes at
 * lbase + lpages[i] * page_size locally and raddr + rpages[i] * page_size
 * remotely (lpages/rpages NULL: i).  lbase lies in lmem, raddr in rkey's
 * range; every page is bounds-checked (the message names the first bad i).
 * No list is built by the caller.  With opts->index_mem GW_INDEX_DEVICE the
 * arrays are in the local GPU's memory and checked there, after posting
 * (gw_xfer_opts_t). */
GW_API gw_status_t gw_xfer_pages(gw_ep_t *ep, int op, gw_mem_t *lmem, void *lbase, const uint32_t *lpages,
                                 gw_rkey_t *rkey, uint64_t raddr, const uint32_t *rpages, size_t count,
                                 size_t page_size, const gw_xfer_opts_t *opts, gw_request_t **req);

/* A prepared page list: the two index arrays of paged transfers that
 * repeat (each layer of a KV cache moving the same blocks between its own
 * regions), copied once (lpages/rpages NULL: 0..count-1; later changes to
 * the caller's arrays do not reach it) with their lowest and highest page.
 * gw_xfer_pages_prepared(..., pages, page_size, ...) is then gw_xfer_pages
 * with these arrays, its bounds checked from the two spans (no pass over
 * the indices) and, GPU to peer GPU over intra, no copy of them: the page
 * kernel reads the list's copy in the local GPU's memory, made on the
 * first such transfer (pinned host memory where that fails).
 * gw_pages_destroy() while transfers use it frees it when the last of them
 * completes (no later post may name it).  Destroy it before its context.
 * Errors: GW_ERR_INVALID (NULL out, more than 2^32 - 1 pages),
 * GW_ERR_NOMEM. */
typedef struct gw_pages gw_pages_t;
GW_API gw_status_t gw_pages_create(gw_context_t *ctx, const uint32_t *lpages, const uint32_t *rpages, size_t count,
                                   gw_pages_t **out);
GW_API gw_status_t gw_pages_destroy(gw_pages_t *pages);
/* gw_xfer_pages over a prepared page list (above): the same checks, errors
 * and completion; GW_ERR_INVALID for a NULL list or one of another
 * context. */
GW_API gw_status_t gw_xfer_pages_prepared(gw_ep_t *ep, int op, gw_mem_t *lmem, void *lbase, gw_rkey_t *rkey,
                                          uint64_t raddr, gw_pages_t *pages, size_t page_size,
                                          const gw_xfer_opts_t *opts, gw_request_t **req);
/* gw_xfer_batch over a prepared selection: a gw_pages_t (gw_pages_create)
 * read as entry indices, for a list transfer that repeats (each layer of a
 * KV cache moving the same blocks between its own descriptor tables).
 * Entry i of the batch pairs local entry lpages[i] with remote entry
 * rpages[i] of the arrays the selection copied (NULL: i), count entries.
 * The indices are checked against the lists' sizes from the selection's
 * lowest and highest (no pass over them), and the paired lengths need no
 * pass where every entry of both lists has one length (a pass over the
 * pairs where not, as gw_xfer_batch).  GPU to peer GPU over intra, where
 * gw_xfer_batch goes by one kernel launch over the lists' tables, the
 * kernel reads the selection's copy of the indices in the local GPU's
 * memory (made on the first such transfer; pinned host memory where that
 * fails): nothing is copied at posting.  Elsewhere the batch is built as
 * gw_xfer_batch builds it.  Same options (notifications, integrity),
 * completion and errors as gw_xfer_batch (an index outside a list:
 * GW_ERR_INVALID naming the entry), plus GW_ERR_INVALID for a NULL or
 * destroyed selection or one of another context.  The selection may serve
 * lists and page transfers alike; gw_pages_destroy() while transfers use it
 * frees it when the last of them completes. */
GW_API gw_status_t gw_xfer_batch_prepared(gw_ep_t *ep, int op, gw_dlist_t *local, gw_dlist_t *remote,
                                          gw_pages_t *sel, const gw_xfer_opts_t *opts, gw_request_t **req);

/* Waits until at least count counted notifications of id have arrived on
 * ep (in any order, from batches finishing in any order) and takes count of
 * them.  count 0 returns GW_OK at once.  timeout_ms as gw_accept(): 0 polls
 * (GW_INPROGRESS when fewer arrived), GW_ERR_TIMEOUT when it expires; on
 * either nothing is taken.  A counted notification of id whose data failed
 * the integrity check (below) is taken by the next call for id, which
 * returns GW_ERR_INTEGRITY naming the entry (the good ones stay counted). */
GW_API gw_status_t gw_notify_count_wait(gw_ep_t *ep, uint64_t id, uint64_t count, int timeout_ms);
/* How many counted notifications of id have arrived and not been taken. */
GW_API gw_status_t gw_notify_count(gw_ep_t *ep, uint64_t id, uint64_t *count);

/* ------------------------------------------------------------------------ */
/* End-to-end integrity (opt-in; docs/INTEGRITY.md).                        */
/*                                                                          */
/* With GPUWIRE_INTEGRITY=on or gw_config_t.integrity on either side, an     */
/* endpoint checks every put that delivers a notification (gw_put_notify,   */
/* gw_xfer_batch and gw_xfer_pages with one, ordered or counted): the       */
/* initiator takes a CRC32C of each entry at the source when it posts (host  */
/* memory: the CPU's crc32 instruction where there is one; GPU memory: a    */
/* kernel), the target takes it again where the entry landed before it     */
/* delivers the notification.  Both sides must run a version that knows the */
/* check (the handshake says; a side that asks for it refuses notifying     */
/* puts to a peer without it rather than sending them unchecked).           */
/* gw_ep_query's path ends with "; integrity: crc32c (...)" when it checks. */
/*  - a match: as without the check, except that the request completes only */
/*    once the target's verdict is back (one message each way more);       */
/*  - a mismatch: the request fails with GW_ERR_INTEGRITY, and the target's  */
/*    gw_notify_wait / gw_notify_count_wait report GW_ERR_INTEGRITY in place */
/*    of that notification; both details name the first entry that differs */
/*    (page i of gw_xfer_pages, entry i of gw_xfer_batch, put 0 of          */
/*    gw_put_notify), its remote address and offset in its region, the CRC  */
/*    taken at the source and the one found.  The endpoint stays usable.    */
/* The data is read again at the target when the notification arrives: a    */
/* later put into the same bytes posted before this request completed can  */
/* make it fail.  Puts without a notification and gets are not checked.     */
/* gw_xfer_opts_t.integrity turns the check off (or insists on it) per      */
/* batch.                                                                   */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */
/* GW_INPROGRESS, GW_OK or the operation's error.  Does not progress. */
GW_API gw_status_t gw_request_test(const gw_request_t *req);
/* Progresses the context until the request completes or timeout_ms passes
 * (-1: no limit; GW_ERR_TIMEOUT then, the request stays valid). */
GW_API gw_status_t gw_request_wait(gw_request_t *req, int timeout_ms);

typedef struct gw_request_info {
    size_t size;          /* sizeof(gw_request_info_t), set by the caller */
    gw_status_t status;
    size_t length;        /* bytes moved; for a recv the message length (may
                             exceed the buffer when truncated) */
    uint64_t tag;         /* for a recv: the tag of the matched message */
    /* version 1 ends here */
    char error_detail[256]; /* why this request failed: the operation and its
                               input, then the cause, e.g. "gw_get(len=4096,
                               raddr=0x7f..): endpoint to 10.0.0.2:4000 failed:
                               no data from peer ... for 10000 ms"; "" unless
                               status is an error */
} gw_request_info_t;
GW_API gw_status_t gw_request_info(const gw_request_t *req, gw_request_info_t *info);

/* Releases a request.  A receive that no message matched yet is withdrawn
 * (as by gw_request_cancel: it will not take a later message); any other
 * operation still in progress continues and its completion is discarded. */
GW_API void gw_request_free(gw_request_t *req);

/* ---- cancel, many requests, probe, listener statistics ------------------ */
/* Cancels any request: put, get, put_notify, send, recv, flush, batch or
 * paged transfer.  What of it has not reached the wire is withdrawn (a
 * receive no message matched, a waiting flush, a put's or get's pieces
 * still queued in the transport, a batch's runs, ring slots or entries
 * not yet moved, a send whose message - a rendezvous send's announcement
 * included - the peer has not been sent yet); what is on the wire is let
 * finish, never cut mid-message.
 * Returns:
 *  - GW_OK: the request is complete on return, canceled now (status
 *    GW_ERR_CANCELED: nothing of it is on the wire any more, nothing of
 *    it lands at the target from now on, its buffer is the caller's
 *    again; gw_request_info's length is 0 when none of it had reached the
 *    peer, else the bytes that had) or complete before (its own status,
 *    unchanged);
 *  - GW_INPROGRESS: part of it is on the wire.  It completes on its own,
 *    once no transport, copy engine or NIC reads or writes its local
 *    memory any more: GW_OK when every byte moved anyway, GW_ERR_CANCELED
 *    when the rest was dropped (a put's target range then holds old bytes,
 *    new bytes or a mix, new ones on at most gw_request_info's length of
 *    bytes; a get's local buffer likewise), or the endpoint's error.  Its completion is the point after which nothing of it lands
 *    at the target.  It is bounded: a canceled request still on the wire
 *    GPUWIRE_OP_TIMEOUT_MS (default 10 s) after the cancel fails its
 *    endpoint with GW_ERR_PEER_TIMEOUT (the peer stopped moving it);
 *  - GW_ERR_INVALID for NULL.
 * A canceled put_notify or notifying batch that ends with an error
 * delivers no notification (one that ends GW_OK delivers it as usual).  What each transport can withdraw, and what
 * reaches a target whose endpoint failed: docs/ERRORS.md, "Cancel and
 * bounds". */
GW_API gw_status_t gw_request_cancel(gw_request_t *req);

/* Tests n requests without progressing (NULL entries are skipped): writes
 * the indices of the complete ones, in order, to done_idx (room for n) and
 * their number to *ndone.  GW_ERR_INVALID for NULL arrays. */
GW_API gw_status_t gw_request_test_many(gw_request_t *const *reqs, size_t n, size_t *done_idx,
                                        size_t *ndone);
/* Progresses until one of n requests (of one context; NULL entries are
 * skipped) is complete and writes its index (the lowest complete one) to
 * *index.  timeout_ms as gw_request_wait() (GW_ERR_TIMEOUT).  Cost per
 * progress pass is O(1) while nothing completes and O(n) after completions.
 * GW_ERR_INVALID when no entry is a request or they belong to several
 * contexts. */
GW_API gw_status_t gw_request_wait_any(gw_request_t *const *reqs, size_t n, int timeout_ms,
                                       size_t *index);

typedef struct gw_probe_info {
    size_t size;    /* sizeof(gw_probe_info_t), set by the caller */
    size_t length;  /* the message's full length */
    uint64_t tag;   /* its tag */
} gw_probe_info_t;
/* Looks for a message that arrived on ep and that no receive took yet,
 * matching (msg_tag & mask) == (tag & mask): the one gw_recv() with the same
 * tag and mask would take.  Runs one progress pass first.  GW_OK (info
 * filled; the message stays queued), GW_INPROGRESS when there is none yet
 * (or that message is still arriving), GW_ERR_ENDPOINT_FAILED when none is
 * queued and the endpoint failed. */
GW_API gw_status_t gw_probe(gw_ep_t *ep, uint64_t tag, uint64_t mask, gw_probe_info_t *info);

typedef struct gw_listener_info {
    size_t size;                  /* sizeof(gw_listener_info_t), set by the caller */
    char addr[80];                /* "host:port" */
    unsigned long accepted;       /* endpoints handed out by gw_accept() */
    unsigned long ready;          /* handshakes complete, waiting for gw_accept() */
    unsigned long pending;        /* handshakes in progress (with endpoints whose tcp streams are still joining) */
    unsigned long failed_handshakes;
    gw_status_t last_failure;     /* status of the latest failed handshake, GW_OK if none */
    char last_failure_detail[384]; /* its peer and reason, e.g. "from 10.0.0.7:5123:
                                      client failed authentication: ..." */
} gw_listener_info_t;
/* Statistics of a listener: what gw_accept() cannot say, e.g. that clients
 * came and failed authentication. */
GW_API gw_status_t gw_listener_query(const gw_listener_t *l, gw_listener_info_t *info);

/* ------------------------------------------------------------------------ */
/* Settings registry (what `gpuwire info` prints)                           */
/* ------------------------------------------------------------------------ */
typedef struct gw_setting_desc {
    const char *name;       /* "GPUWIRE_TCP_STREAMS" */
    const char *default_value;
    const char *help;
    /* what the value may be (from the registry's kind and range), e.g. "integer 1..16, or auto", "size 4K..1G (K/M/G/T)",
     * "one of auto, force or off", "text" */
    const char *accepts;
} gw_setting_desc_t;

/* The i-th known setting, or NULL past the end. */
GW_API const gw_setting_desc_t *gw_setting_at(size_t i);
/* The value the context is using for a setting, or NULL if the name is not a
 * setting.  ctx NULL: the value a context created now would use (the
 * process environment, else the default). */
GW_API const char *gw_setting_value(const gw_context_t *ctx, const char *name);
/* Where that value came from: 1 the environment, 0 the default, -1 not a
 * setting.  ctx NULL: the process environment now. */
GW_API int gw_setting_from_env(const gw_context_t *ctx, const char *name);

/* Transports compiled in and whether each is usable here, with the reason
 * when not.  Returns GW_ERR_NOT_FOUND past the end. */
typedef struct gw_transport_info {
    size_t size;
    char name[16];
    int usable;
    char detail[256];       /* device list when usable, reason when not */
} gw_transport_info_t;
GW_API gw_status_t gw_transport_at(const gw_context_t *ctx, size_t i, gw_transport_info_t *info);

/* ------------------------------------------------------------------------ */
/* Names: agents, published regions, the directory (docs/NAMES.md)          */
/*                                                                          */
/* An agent is a context with a name and a listener.  It publishes          */
/* registered regions under names; a peer reaches it by name and fetches    */
/* the keys of its regions by name.  The agent's handshake hands each peer  */
/* its table of published keys (authenticated with GPUWIRE_AUTH_SECRET),    */
/* so two processes need nothing but an address (gw_peer_add, GPUWIRE_PEERS)*/
/* - or, for many nodes, a directory (GPUWIRE_DIRECTORY=etcd://host:port)   */
/* where agents register under a lease that a background thread renews and */
/* that a watch follows.  The directory holds addresses, never keys.        */
/* That thread is the context's own (lease and watch, on its own sockets);  */
/* the calls below are used by one thread at a time like everything else.   */
/* ------------------------------------------------------------------------ */

/* Makes the context the agent `name` (1..63 of [A-Za-z0-9._:@+-]): listens
 * on addr (NULL: ":0", every address, a free port) and, when a directory is
 * set, registers the listener's address there under a lease.  The listener
 * is the caller's (gw_accept works as usual; endpoints not accepted still
 * serve puts and gets); destroying it ends the agent.  One agent per context.
 * A name in the directory belongs to one live agent at a time: the first to
 * register it keeps it while its lease lives (it renews it by itself), and a
 * second agent under the same name is refused with GW_ERR_BUSY naming the
 * holder (address, pid, host, the lease's seconds left) - never a takeover.
 * The name is free again when the holder's listener is destroyed (at once)
 * or its lease runs out (it died, or was stopped longer than
 * GPUWIRE_DIRECTORY_TTL).  The check and the registration are one etcd
 * transaction, so of agents racing for a free name exactly one wins.  An
 * agent whose lease ran out while it was stopped and whose name another
 * agent took meanwhile stays unlisted (logged as an error) and registers
 * again once the name is free.  Without a directory there is no shared
 * registry to take over: each peer maps the name to an address itself, and
 * the handshake checks the agent there has that name.
 * Errors: GW_ERR_INVALID (bad name), GW_ERR_BUSY (already an agent, or a
 * live agent holds the name in the directory), GW_ERR_UNAVAILABLE
 * (directory unreachable; nothing is left behind), GW_ERR_ADDRESS and the
 * other errors of gw_listen(). */
GW_API gw_status_t gw_agent_listen(gw_context_t *ctx, const char *name, const char *addr,
                                   gw_listener_t **out);

/* Publishes a region registered with remote access under `name` in this
 * context's table (and lists it in the directory, without its key).  Peers
 * that connect later receive it in the handshake; connected peers fetch it
 * on their next gw_peer_regions() miss.  Publishing a name again replaces
 * it; gw_mem_dereg() withdraws every name of the region.  Works before or
 * after gw_agent_listen().  Errors: GW_ERR_INVALID (bad name, region without
 * remote access), GW_ERR_NO_RESOURCE (the table would pass its 1 MiB limit:
 * about 19,000 regions with short names; past 12 KiB, about 150 regions,
 * peers fetch it in pieces on first use, see docs/NAMES.md). */
GW_API gw_status_t gw_mem_publish(gw_mem_t *mem, const char *name);
/* Withdraws a published name.  GW_ERR_NOT_FOUND when not published. */
GW_API gw_status_t gw_mem_unpublish(gw_context_t *ctx, const char *name);

/* Peer-to-peer form: agent `name` listens at addr ("host:port"). */
GW_API gw_status_t gw_peer_add(gw_context_t *ctx, const char *name, const char *addr);

/* The endpoint to agent `name`, connected on first use (the address from
 * gw_peer_add(), GPUWIRE_PEERS, then the directory) and reused afterwards.
 * When the previous endpoint failed, or the directory says the agent came
 * back, the call connects again.  The context owns the endpoint (closing it
 * yourself is allowed; the next call reconnects).  Errors: GW_ERR_NOT_FOUND
 * (no such agent: the detail names the directory asked, fast: no waiting),
 * GW_ERR_UNAVAILABLE (directory unreachable), the errors of gw_connect(),
 * GW_ERR_NOT_FOUND also when the agent at the address carries another name. */
GW_API gw_status_t gw_peer_ep(gw_context_t *ctx, const char *name, gw_ep_t **out);

/* The keys of n regions that agent `peer` published, unpacked on its
 * endpoint (gw_peer_ep): out[i] for names[i].  A name missing from the table
 * the peer sent refreshes it from the peer once.  All or nothing: on an error
 * no key is returned.  Free each with gw_rkey_destroy().  When the agent
 * restarts (a new epoch), operations with keys of the old epoch fail with
 * GW_ERR_INVALID_KEY saying so; call again for the new ones.
 * Errors: GW_ERR_INVALID (a NULL or invalid peer name, NULL names or out, a
 * NULL entry of names), GW_ERR_NOT_FOUND (naming the region and the agent),
 * those of gw_peer_ep(). */
GW_API gw_status_t gw_peer_regions(gw_context_t *ctx, const char *peer, const char *const *names, size_t n,
                                   gw_rkey_t **out);

typedef struct gw_peer_info {
    size_t size;         /* sizeof(gw_peer_info_t), set by the caller */
    char addr[80];       /* where the agent listens, "" when unknown */
    uint64_t epoch;      /* the agent's epoch (grows when it restarts), 0 before the first connection */
    int listed;          /* 1 listed in the directory, 0 not (gone), -1 no directory consulted */
    unsigned changes;    /* times the directory watch saw the agent leave or come back */
    int connected;       /* 1 while its endpoint is healthy */
    unsigned restarts;   /* connections that found a new epoch */
} gw_peer_info_t;
/* What this context knows of agent `name` (no network traffic).
 * GW_ERR_NOT_FOUND when it never heard of it. */
GW_API gw_status_t gw_peer_query(gw_context_t *ctx, const char *name, gw_peer_info_t *info);

/* Being told when an agent leaves the directory or comes back (directory
 * form only: the directory's watch is what sees it).
 *
 * GW_PEER_LEFT: the agent's entry went (its lease ran out: it died or was
 * stopped longer than GPUWIRE_DIRECTORY_TTL; or it ended its listener).
 * GW_PEER_BACK: it is listed again, or it re-registered as another context
 * (`restarted`: a new context uuid, so its keys of the old epoch are void
 * and gw_peer_regions() returns the new ones).
 *
 * Which agents: by default those this context used (looked up through the
 * directory with gw_peer_ep / gw_peer_regions), from the first lookup on;
 * with GW_PEER_WATCH_ALL every agent of the directory.  The watch thread
 * queues events (up to 1,024; past that the oldest are dropped and the next
 * event counts them in `dropped`) and makes the context fd readable.
 * Threading: the callback is called from gw_progress() (and the calls that
 * progress, e.g. gw_request_wait) on the thread that calls it, never from
 * the watch thread, one event at a time, in the order the watch saw them.
 * It may call gpuwire functions on the context (gw_peer_ep, gw_peer_regions,
 * gw_peer_query...) except gw_context_destroy; events that arrive while it
 * runs are handed over after it returns.  Without a callback (cb NULL) events stay
 * queued for gw_peer_event_next().  An event says what the watch saw; a
 * healthy endpoint to an agent that "left" keeps working until the
 * connection itself fails. */
typedef enum gw_peer_event_type { GW_PEER_LEFT = 1, GW_PEER_BACK = 2 } gw_peer_event_type_t;
typedef struct gw_peer_event {
    size_t size;         /* sizeof(gw_peer_event_t), set by the caller of gw_peer_event_next */
    int type;            /* gw_peer_event_type_t */
    char name[64];       /* the agent */
    char addr[80];       /* GW_PEER_BACK: where it listens now; LEFT: where it listened */
    uint64_t epoch;      /* GW_PEER_BACK: its new epoch; LEFT: the epoch that left */
    int restarted;       /* GW_PEER_BACK: another context than the one listed before */
    unsigned dropped;    /* events dropped (queue full) since the previous one taken */
} gw_peer_event_t;
enum {
    GW_PEER_WATCH_ALL = 1u << 0, /* every agent of the directory, not only those this context used */
    GW_PEER_WATCH_OFF = 1u << 1  /* stop: no more events (queued ones are discarded) */
};
/* Starts (or changes, or with GW_PEER_WATCH_OFF stops) the events of this
 * context.  Calling it again replaces flags, callback and argument.
 * Errors: GW_ERR_UNAVAILABLE without a directory (GPUWIRE_DIRECTORY): the
 * peer-to-peer form has no watch; an endpoint's failure is its signal. */
GW_API gw_status_t gw_peer_watch(gw_context_t *ctx, unsigned flags,
                                 void (*cb)(void *arg, const gw_peer_event_t *ev), void *arg);
/* Takes the oldest queued event (events are queued when gw_peer_watch was
 * given no callback).  GW_OK with *ev filled; GW_ERR_NOT_FOUND when none is
 * queued (no waiting: wait on the context fd / gw_context_wait, which
 * become ready when one arrives); GW_ERR_INVALID when ev->size is too small. */
GW_API gw_status_t gw_peer_event_next(gw_context_t *ctx, gw_peer_event_t *ev);

/* One line of a directory listing: an agent (region == NULL) or a region. */
typedef struct gw_dir_entry {
    const char *agent;
    const char *region;  /* NULL for the agent's own line */
    const char *addr;    /* agent: listen address */
    uint64_t epoch;      /* agent: its epoch (the directory revision of its registration) */
    uint64_t raddr, rlen;/* region: address and length */
    const char *type;    /* region: "host" or "cuda" */
    unsigned access;     /* region: GW_ACCESS_REMOTE_* */
} gw_dir_entry_t;
/* Lists every agent and region the directory holds (agents first, sorted
 * by key).  cb returns non-zero to stop.  GW_ERR_UNAVAILABLE without a
 * directory or when it does not answer. */
GW_API gw_status_t gw_directory_list(gw_context_t *ctx, int (*cb)(void *arg, const gw_dir_entry_t *e), void *arg);
/* One line saying which directory the context uses and whether it answers,
 * e.g. "etcd://127.0.0.1:2379 prefix /gpuwire/: reachable, revision 12". */
GW_API gw_status_t gw_directory_describe(gw_context_t *ctx, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* GPUWIRE_H */
