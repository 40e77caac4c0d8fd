/* SPDX-License-Identifier: Apache-2.0 */
/* intra_cma.c - several CMA copies in one system call (intra.c batches the
 * small puts and gets posted between two progress calls). */
#include "transport/intra/intra.h"

#include <errno.h>
#include <sys/uio.h>

size_t gw_intra_cma_batch(pid_t pid, int to_remote, const struct iovec *loc, const struct iovec *rem, size_t n,
                          int *err)
{
    size_t done = 0;
    *err = 0;
    while (done < n) {
        size_t k = n - done < GW_INTRA_IOV_MAX ? n - done : GW_INTRA_IOV_MAX, want = 0;
        for (size_t i = 0; i < k; i++)
            want += loc[done + i].iov_len;
        ssize_t got = to_remote ? process_vm_writev(pid, loc + done, k, rem + done, k, 0)
                                : process_vm_readv(pid, loc + done, k, rem + done, k, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            *err = errno;
            return done;
        }
        if ((size_t)got == want) {
            done += k;
            continue;
        }
        /* partial: the entries wholly moved count, the caller redoes the rest */
        for (size_t i = 0; i < k && (size_t)got >= loc[done].iov_len; i++) {
            got -= (ssize_t)loc[done].iov_len;
            done++;
        }
        *err = EFAULT;
        return done;
    }
    return done;
}
