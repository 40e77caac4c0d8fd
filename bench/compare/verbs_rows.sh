#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# verbs_rows.sh [BUILD_DIR] - bench/compare/verbs_row.sh for every operation in ONE
# Soft-RoCE guest boot: 8-byte latency (against ib_write_lat), then put, get
# and send at SIZES (against ib_write_bw / ib_read_bw / ib_send_bw), each
# round alternating gpuwire, OLD_BENCH (when set) and perftest.  For a
# before/after of a change: build the old commit's gw_verbs_bench elsewhere
# and pass it as OLD_BENCH, e.g.
#   git archive main | tar -x -C /tmp/old && cmake -S /tmp/old -B /tmp/old/build \
#     && cmake --build /tmp/old/build --target gw_verbs_bench
#   OLD_BENCH=/tmp/old/build/tests/verbs/gw_verbs_bench bench/compare/verbs_rows.sh build
# Knobs: SIZES (default "4096 65536 1048576"), REPS (3), LAT_N (1000), N (64).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then
  [ -x "$B/tests/verbs/gw_verbs_bench" ] || { echo "build first" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1500} "$HERE/../../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_rows.sh" "$B"
fi
export REPS=${REPS:-3}
echo "guest: $(nproc) CPUs; host load when booted: see the caller's uptime"
OP=lat S=8 N=${LAT_N:-1000} "$HERE/verbs_row.sh" "$B" | grep "best of"
for op in put get send; do
  for s in ${SIZES:-4096 65536 1048576}; do
    OP=$op S=$s N=${N:-64} "$HERE/verbs_row.sh" "$B" | grep "best of"
  done
done
