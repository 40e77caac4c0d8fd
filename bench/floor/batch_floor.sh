#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# batch_floor.sh [BUILD_DIR] - the host-memory batch rows against what
# this machine gives any program moving the same layout the same way, in
# one run: per transport and shape, gpuwire's batched put against its own
# contiguous put of the same bytes (as bench/compare/batch.sh), and
# bench/floor/batch_floor.c (no gpuwire) moving the same scattered layout against
# one piece with the kernel or CPU path that transport uses:
#   tcp          -> TCP loopback, iovecs per entry   (floor mode tcp)
#   intra        -> process_vm_writev, an iovec pair per entry (cma)
#   intra-alloc  -> memcpy per entry into shared memory (copy)
#   intra-ring   -> intra into registered memory with the target polling
#                   (perf --busy-poll): small entries through the ring its
#                   progress engine empties -> two copies through 36 KiB
#                   slots of shared memory, a spinning child (ring)
# Each round runs the four measurements back to back (the host's speed
# changes from minute to minute: a ratio is only worth its own round), and
# the table gives the median over ROUNDS of each ratio: gpuwire's, the
# floor's, and gpuwire's as a share of the floor's ("of floor": 1.00 means
# gpuwire adds nothing the scattered layout does not already cost).
# usage: bench/floor/batch_floor.sh [BUILD_DIR]   ROWS="tcp intra intra-alloc intra-ring" ROUNDS=5 DUR=1 BIG_DUR=2
#        SHAPES="256x1K 4096x16K 64x1M"
set -u
bld=${1:-build}
here=$(dirname "$0")
rounds=${ROUNDS:-5}
dur=${DUR:-1}
rows=${ROWS:-tcp intra intra-alloc intra-ring}
shapes=${SHAPES:-256x1K 4096x16K 64x1M}
[ -x "$bld/gpuwire" ] || { echo "batch_floor.sh: build first ($bld/gpuwire missing)" >&2; exit 2; }
floor="$bld/batch_floor"
if [ ! -x "$floor" ] || [ "$floor" -ot "$here/batch_floor.c" ]; then
  cc -O2 -o "$floor" "$here/batch_floor.c" || { echo "batch_floor.sh: batch_floor.c did not build" >&2; exit 2; }
fi
gw() { # transport args... -> GB/s
  tr=${1%-alloc}
  tr=${tr%-ring}
  shift
  GPUWIRE_TRANSPORTS=$tr "$bld/gpuwire" perf --loopback --bw-only --json --window 1 --duration "$sdur" "$@" 2>/dev/null |
    tail -1 | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'
}
med() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# gpuwire batches against the machine's floor, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r) $(uname -m), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "# $rounds rounds; in each: gpuwire batch, gpuwire contiguous (perf --loopback --window 1, ${dur}s; 64 MiB shapes ${BIG_DUR:-2}s), then batch_floor (scattered, contiguous); medians of the rounds' ratios"
printf '%-12s %-9s %9s %9s %9s %9s %9s %9s %6s\n' row shape gw_batch gw_contig gw_ratio fl_scat fl_contig fl_ratio "of_floor"
for row in $rows; do
  case $row in
    tcp) mode=tcp xa= ;;
    intra) mode=cma xa= ;;
    intra-alloc) mode=copy xa=--alloc ;;
    intra-ring) mode=ring xa=--busy-poll ;;
    *) echo "batch_floor.sh: row $row (tcp, intra, intra-alloc or intra-ring)" >&2; exit 2 ;;
  esac
  for shape in $shapes; do
    n=${shape%x*} s=${shape#*x}
    case $s in *K) b=$(( ${s%K} * 1024 )) ;; *M) b=$(( ${s%M} * 1048576 )) ;; *) b=$s ;; esac
    tot=$((n * b))
    [ "$row" = intra-ring ] && [ "$b" -gt 16384 ] && continue # (the ring takes entries averaging 16 KiB or less)
    sdur=$dur
    [ "$tot" -ge 16777216 ] && sdur=${BIG_DUR:-2}
    : > "$tmp/r"
    i=0
    while [ $i -lt "$rounds" ]; do
      gb=$(gw "$row" --batch "$n" --size "$s" $xa)
      gc=$(gw "$row" --size "$tot" $xa)
      fl=$("$floor" "$mode" "$n" "$b" "$sdur" 1 | awk '$1 == "floor" {print $5, $6}')
      echo "$gb $gc $fl" >> "$tmp/r"
      i=$((i + 1))
    done
    # per round: gw ratio, floor ratio, gw ratio / floor ratio
    awk '$1 > 0 && $2 > 0 && $3 > 0 && $4 > 0 {g = $1 / $2; f = $3 / $4; printf "%.4f %.4f %.4f\n", g, f, g / f}' "$tmp/r" > "$tmp/q"
    printf '%-12s %-9s %9s %9s %9s %9s %9s %9s %6s\n' "$row" "$shape" \
      "$(cut -d' ' -f1 "$tmp/r" | med)" "$(cut -d' ' -f2 "$tmp/r" | med)" "$(cut -d' ' -f1 "$tmp/q" | med)" \
      "$(cut -d' ' -f3 "$tmp/r" | med)" "$(cut -d' ' -f4 "$tmp/r" | med)" "$(cut -d' ' -f2 "$tmp/q" | med)" \
      "$(cut -d' ' -f3 "$tmp/q" | med)"
    [ -n "${VERBOSE:-}" ] && sed 's/^/#   round: /' "$tmp/r"
  done
done
echo "# goals: gw_ratio >= 0.8 at 256x1K, >= 0.95 at 4096x16K and 64x1M"
