/* SPDX-License-Identifier: Apache-2.0 */
/* ofi_syms.h - the libfabric entry points gpuwire uses, loaded at run time
 * (transport layer, ofi).
 *
 * libfabric.so.1 is dlopen'ed (GPUWIRE_OFI_LIB overrides the name) and each
 * symbol below is bound with dlvsym() to the ABI version named here, so a
 * newer library whose default version moved on still hands us the struct
 * layouts we were compiled against (fi_getinfo@FABRIC_1.3 is the fi_info of
 * every libfabric 1.x header since 1.5).  Everything else the transport
 * calls (fi_domain, fi_endpoint, fi_cq_read, fi_writemsg, fi_mr_regattr ...)
 * is inline in the <rdma/fi_*.h> headers and goes through the objects' ops
 * tables: it needs no symbol.  Only the headers' types and inline wrappers
 * come from libfabric-dev.
 *
 * X(field, "symbol", "version", required, return type, (argument types))
 */
#ifndef GW_OFI_SYMS_H
#define GW_OFI_SYMS_H

#include <rdma/fabric.h>

#define GW_FI_SYMS(X)                                                                          \
    X(getinfo, "fi_getinfo", "FABRIC_1.3", 1, int,                                             \
      (uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **)) \
    X(freeinfo, "fi_freeinfo", "FABRIC_1.3", 1, void, (struct fi_info *))                     \
    X(dupinfo, "fi_dupinfo", "FABRIC_1.3", 1, struct fi_info *, (const struct fi_info *))     \
    X(fabric, "fi_fabric", "FABRIC_1.1", 1, int,                                               \
      (struct fi_fabric_attr *, struct fid_fabric **, void *))                                 \
    X(strerror, "fi_strerror", "FABRIC_1.0", 1, const char *, (int))                          \
    X(version, "fi_version", "FABRIC_1.0", 1, uint32_t, (void))

/* The loaded table. */
typedef struct gw_fi {
    void *handle;
    char lib[256]; /* the name that was opened */
#define GW_FI_FIELD_(field, sym, ver, req, ret, args) ret(*field) args;
    GW_FI_SYMS(GW_FI_FIELD_)
#undef GW_FI_FIELD_
} gw_fi_t;

/* Loads libfabric once per process (thread-safe) and returns the table, or
 * NULL with the reason in why and *broken set: 0 when the library is absent
 * (not installed: the usual case, told quietly), 1 when it is there but
 * unusable (a symbol missing: told loudly). */
const gw_fi_t *gw_fi_get(char *why, size_t whylen, int *broken);

#endif
