#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_batch.sh [BUILD_DIR] - batched transfers over verbs in the Soft-RoCE
# guest (tests/rxe/run-in-rxe-vm.sh, rxe0 loopback): bench/compare/batch.sh with
# TRANSPORTS=verbs, i.e. a batched put of N descriptors against one
# contiguous put of the same bytes (gpuwire perf --loopback --batch N), and
# at 256 x 1 KiB against UCX's put-per-descriptor-then-flush over rc_verbs
# on the same rxe device (UCX in client-server mode, connected through
# rdmacm to rxe0's address: from a worker address UCX's RC needs UD, which
# hangs over rxe; bench/compare/ucx_batch_bench.c).  Knobs: REPS (default 3), DUR (default 1),
# BIG_DUR (default 12: the 64 MiB shapes, several operations a run; 1 s held
# one 64 MiB operation, and 64 x 1 MiB came out anywhere from 0.69x to 1.05x).
# Under emulation the absolute figures mean little; the ratios count.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then   # on the host: boot the guest and run this script inside
  [ -x "$B/gpuwire" ] || { echo "build first: $B/gpuwire missing" >&2; exit 2; }
  # the UCX side, built here (the guest's root is read-only with a throw-away overlay)
  if [ -e /usr/include/ucp/api/ucp.h ]; then
    cc -O2 -o "$B/ucx_batch_bench" "$HERE/ucx_batch_bench.c" -lucp -lucs || echo "# UCX bench did not build" >&2
  fi
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1500} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_batch.sh" "$B"
fi
echo "# guest $(uname -r), device $RXE_DEV (rxe loopback), gid $RXE_GID_INDEX, $(nproc) vCPUs"
export GPUWIRE_IB_DEVICE=$RXE_DEV GPUWIRE_IB_TIMEOUT=16 GPUWIRE_IB_GID_INDEX=$RXE_GID_INDEX
export UCX_NET_DEVICES=$RXE_DEV:1 UCX_IB_GID_INDEX=$RXE_GID_INDEX BENCH_UCX_SOCKADDR=$RXE_IP
TRANSPORTS=verbs REPS=${REPS:-3} DUR=${DUR:-1} BIG_DUR=${BIG_DUR:-12} exec "$HERE/batch.sh" "$B"
