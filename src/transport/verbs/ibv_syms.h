/* SPDX-License-Identifier: Apache-2.0 */
/* ibv_syms.h - the libibverbs entry points gpuwire uses, loaded at run time
 * (transport layer, verbs).
 *
 * libibverbs.so.1 is dlopen'ed (GPUWIRE_IB_LIB overrides the name) and every
 * symbol below is bound with dlvsym() to the ABI version named here, so a
 * newer library with a changed default version still gives us the ABI we
 * were compiled against.  Post/poll/arm (ibv_post_send, ibv_poll_cq, ...) are
 * inline in verbs.h and go through the context's ops table: they need no
 * symbol.  Only this header's types come from <infiniband/verbs.h>.
 *
 * X(field, "symbol", "version", required, return type, (argument types))
 */
#ifndef GW_VERBS_IBV_SYMS_H
#define GW_VERBS_IBV_SYMS_H

#include <infiniband/verbs.h>
#include <stddef.h>

#define GW_IBV_SYMS(X)                                                                         \
    X(get_device_list, "ibv_get_device_list", "IBVERBS_1.1", 1, struct ibv_device **, (int *)) \
    X(free_device_list, "ibv_free_device_list", "IBVERBS_1.1", 1, void, (struct ibv_device **)) \
    X(get_device_name, "ibv_get_device_name", "IBVERBS_1.1", 1, const char *,                 \
      (struct ibv_device *))                                                                   \
    X(open_device, "ibv_open_device", "IBVERBS_1.1", 1, struct ibv_context *,                 \
      (struct ibv_device *))                                                                   \
    X(close_device, "ibv_close_device", "IBVERBS_1.1", 1, int, (struct ibv_context *))        \
    X(query_device, "ibv_query_device", "IBVERBS_1.1", 1, int,                                \
      (struct ibv_context *, struct ibv_device_attr *))                                       \
    X(query_port, "ibv_query_port", "IBVERBS_1.1", 1, int,                                    \
      (struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *))                        \
    X(query_gid, "ibv_query_gid", "IBVERBS_1.1", 1, int,                                      \
      (struct ibv_context *, uint8_t, int, union ibv_gid *))                                  \
    X(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1", 1, struct ibv_pd *, (struct ibv_context *))    \
    X(dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1", 1, int, (struct ibv_pd *))                 \
    X(reg_mr, "ibv_reg_mr", "IBVERBS_1.1", 1, struct ibv_mr *,                                \
      (struct ibv_pd *, void *, size_t, int))                                                  \
    X(dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1", 1, int, (struct ibv_mr *))                     \
    X(create_comp_channel, "ibv_create_comp_channel", "IBVERBS_1.0", 1,                       \
      struct ibv_comp_channel *, (struct ibv_context *))                                       \
    X(destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0", 1, int,                \
      (struct ibv_comp_channel *))                                                             \
    X(create_cq, "ibv_create_cq", "IBVERBS_1.1", 1, struct ibv_cq *,                          \
      (struct ibv_context *, int, void *, struct ibv_comp_channel *, int))                    \
    X(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1", 1, int, (struct ibv_cq *))                 \
    X(get_cq_event, "ibv_get_cq_event", "IBVERBS_1.1", 1, int,                                \
      (struct ibv_comp_channel *, struct ibv_cq **, void **))                                  \
    X(ack_cq_events, "ibv_ack_cq_events", "IBVERBS_1.1", 1, void, (struct ibv_cq *, unsigned)) \
    X(create_qp, "ibv_create_qp", "IBVERBS_1.1", 1, struct ibv_qp *,                          \
      (struct ibv_pd *, struct ibv_qp_init_attr *))                                           \
    X(modify_qp, "ibv_modify_qp", "IBVERBS_1.1", 1, int,                                      \
      (struct ibv_qp *, struct ibv_qp_attr *, int))                                           \
    X(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1", 1, int, (struct ibv_qp *))                 \
    X(wc_status_str, "ibv_wc_status_str", "IBVERBS_1.1", 1, const char *,                     \
      (enum ibv_wc_status))                                                                    \
    X(get_async_event, "ibv_get_async_event", "IBVERBS_1.1", 1, int,                          \
      (struct ibv_context *, struct ibv_async_event *))                                       \
    X(ack_async_event, "ibv_ack_async_event", "IBVERBS_1.1", 1, void, (struct ibv_async_event *)) \
    X(event_type_str, "ibv_event_type_str", "IBVERBS_1.1", 1, const char *,                   \
      (enum ibv_event_type))                                                                   \
    X(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", 0, struct ibv_mr *,                 \
      (struct ibv_pd *, uint64_t, size_t, uint64_t, int, int))

/* The loaded table.  Optional entries (required = 0) may be NULL. */
typedef struct gw_ibv {
    void *handle;
    char lib[256]; /* the name that was opened */
#define GW_IBV_FIELD_(field, sym, ver, req, ret, args) ret(*field) args;
    GW_IBV_SYMS(GW_IBV_FIELD_)
#undef GW_IBV_FIELD_
    /* What libibverbs printed on stderr while it loaded its providers (kept
     * off the user's terminal; logged at debug level, shown by the doctor). */
    char init_noise[1024];
} gw_ibv_t;

/* Loads libibverbs once per process (thread-safe) and returns the table, or
 * NULL with the reason in why: "absent" (library not installed) and "broken"
 * (a symbol missing) are told apart in the text.  The first call also lists
 * devices once with libibverbs' stderr captured, so provider-loading warnings
 * ("couldn't load driver ...") never reach the user as errors. */
const gw_ibv_t *gw_ibv_get(char *why, size_t whylen);

/* ibv_get_device_list() with libibverbs' stderr chatter captured into the
 * table's init_noise instead of the terminal. */
struct ibv_device **gw_ibv_device_list(const gw_ibv_t *ibv, int *n);

/* ibv_query_port() the way verbs.h's inline wrapper does it, without the
 * macro: the extended op when the provider has it, the compat symbol otherwise. */
int gw_ibv_query_port(const gw_ibv_t *ibv, struct ibv_context *ctx, uint8_t port,
                      struct ibv_port_attr *attr);

#endif
