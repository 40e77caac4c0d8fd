/* SPDX-License-Identifier: Apache-2.0 */
/* gw_nccl_int.h - what the plugin's two files share (not installed):
 * gw_nccl.c's entry points, written against the newest interface (v12),
 * and the logging through NCCL's logger; gw_nccl_abi.c's tables and shims
 * adapt them to v8 .. v12. */
#ifndef GW_NCCL_INT_H
#define GW_NCCL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"

#define GWN_EXPORT __attribute__((visibility("default")))
#define GWN_MAX_RECVS 8 /* maxRecvs: receives grouped under one irecv */

void gwn_log(ncclDebugLogLevel lvl, unsigned long flags, const char *fn, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define WARN(...) gwn_log(NCCL_LOG_WARN, NCCL_ALL, __func__, __LINE__, __VA_ARGS__)
#define INFO(flags, ...) gwn_log(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)

ncclResult_t gwn_init(ncclDebugLogger_t logfn);
ncclResult_t gwn_devices(int *ndev);
ncclResult_t gwn_props(int dev, ncclNetProperties_v12_t *p);
ncclResult_t gwn_listen(int dev, void *handle, void **listen_comm);
ncclResult_t gwn_connect(int dev, void *handle, void **send_comm);
ncclResult_t gwn_accept(void *listen_comm, void **recv_comm);
ncclResult_t gwn_reg(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t gwn_reg_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset, int fd, void **mhandle);
ncclResult_t gwn_dereg(void *comm, void *mhandle);
ncclResult_t gwn_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void **request);
ncclResult_t gwn_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles, void **request);
ncclResult_t gwn_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
ncclResult_t gwn_test(void *request, int *done, int *sizes);
ncclResult_t gwn_close(void *comm);
ncclResult_t gwn_finalize(void);

#endif
