#!/bin/bash
# verbs_small.sh [BUILD_DIR] - small-operation rate of gpuwire over verbs
# against perftest on the Soft-RoCE device of the qemu guest (issue #14):
# puts against ib_write_bw and sends against ib_send_bw, 8 B to 4 KiB, the
# same size and the same outstanding depth (128, perftest's default tx depth,
# gw_verbs_bench's WINDOW), the two alternating (bench/verbs_ab.sh).  At one
# size, bandwidth ratios are message-rate ratios.
# Knobs: SIZES ("8 64 1024 4096"), OPS ("put send"), N (5000 operations per
# run), REPS (2 rounds per row).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:-$HERE/../build}" && pwd) || { echo "no build dir" >&2; exit 2; }
if [ -z "${RXE_DEV:-}" ]; then
  [ -x "$B/tests/verbs/gw_verbs_bench" ] || { echo "build first" >&2; exit 2; }
  exec env RXEVM_TIMEOUT=${RXEVM_TIMEOUT:-1800} "$HERE/../tests/rxe/run-in-rxe-vm.sh" "$HERE/verbs_small.sh" "$B"
fi
echo "# verbs_small: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), guest $(uname -r), $RXE_DEV, load $(cut -d' ' -f1-3 /proc/loadavg)"
for op in ${OPS:-put send}; do
  for s in ${SIZES:-8 64 1024 4096}; do
    OP=$op S=$s N=${N:-5000} REPS=${REPS:-2} "$HERE/verbs_ab.sh" "$B" | sed 's/^/  /'
  done
done
