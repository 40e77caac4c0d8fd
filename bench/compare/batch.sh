#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# batch.sh [BUILD_DIR] - batched transfers side by side, in one run:
#  - gpuwire's batched put of N descriptors of S bytes (scattered one S apart:
#    `gpuwire perf --batch N -s S`) against one contiguous put of the same
#    N*S bytes on the same transport (goal: >= 0.8x at 256 x 1 KiB, >= 0.95x
#    at 4096 x 16 KiB and 64 x 1 MiB);
#  - at 256 x 1 KiB, against UCX doing what NIXL's UCX backend does (one
#    ucp_put_nbx per descriptor, then a flush: bench/compare/ucx_batch_bench.c) over
#    the same kind of transport (UCX_TLS=tcp,self for tcp, sm,self for intra,
#    rc_verbs,self for verbs; goal >= 3x).  verbs runs in the Soft-RoCE guest:
#    bench/verbs_batch.sh.
# Every measurement is one operation in flight at a time (post, wait), best
# of REPS (default 3) runs of DUR seconds (default 1), the three kinds
# alternating so that machine load hits them alike.  min-ops: the fewest
# operations one gpuwire run of the row made (a figure from one or two
# operations is mostly start-up: raise DUR or BIG_DUR).
# BIG_DUR (default DUR) is the run length of the shapes of 16 MiB or more
# (4096 x 16 KiB and 64 x 1 MiB, 64 MiB each): where one 64 MiB operation
# takes seconds (the Soft-RoCE guest), a run of DUR holds only one or two
# operations and its figure is mostly start-up.
# usage: bench/compare/batch.sh [BUILD_DIR]    TRANSPORTS="tcp intra" REPS=3 DUR=1 BIG_DUR=1 ALLOC_ROWS=intra-alloc
#        GET_ROWS=intra-get
#        (ALLOC_ROWS= leaves out the intra rows with gw_mem_alloc buffers,
#        GET_ROWS= the intra rows of batched gets against one contiguous get
#        (registered memory, CMA); both are there by default when TRANSPORTS
#        names intra)
#        PERF_ARGS="--busy-poll": more `gpuwire perf` options for every
#        gpuwire run; --busy-poll makes the target spin in gw_progress, as
#        UCX's target spins in ucp_worker_progress, and so lets intra puts
#        of small entries take the ring (docs/BATCH.md; bench/compare/intra_ring.sh
#        runs that row alone)
#        HUGE=1: every buffer gpuwire perf allocates (all rows but intra-alloc)
#        in transparent huge pages (`gpuwire perf --hugepages`), batch and
#        contiguous alike: the ratio without the 4 KiB page-walk cost that
#        scattered entries pay more of on a VM (a run of it:
#        docs/results/vm-2026-11-24-quiet-tcp-loopback/batch_ab-huge.txt)
set -u
bld=${1:-build}
reps=${REPS:-3}
dur=${DUR:-1}
tls=${TRANSPORTS:-tcp intra}
hp=
[ "${HUGE:-0}" = 1 ] && hp=--hugepages
ucx=""
if [ -x "$bld/ucx_batch_bench" ] && [ "$bld/ucx_batch_bench" -nt "$(dirname "$0")/ucx_batch_bench.c" ]; then
  ucx="$bld/ucx_batch_bench"   # built already (bench/compare/verbs_batch.sh builds it before the guest boots)
elif [ -e /usr/include/ucp/api/ucp.h ]; then
  ucx="$bld/ucx_batch_bench"
  cc -O2 -o "$ucx" "$(dirname "$0")/ucx_batch_bench.c" -lucp -lucs || ucx=""
fi
[ -n "$ucx" ] || echo "# no UCX headers (apt-get install libucx-dev): the UCX column is left out"
gw() { # transport args... -> bandwidth in GB/s; the run's operations are added to the file $opsf
  tr=${1%-alloc}
  tr=${tr%-get}
  shift
  # shellcheck disable=SC2086 # PERF_ARGS: words
  GPUWIRE_TRANSPORTS=$tr "$bld/gpuwire" perf --loopback --bw-only --json --window 1 --duration "$sdur" ${PERF_ARGS:-} "$@" 2>/dev/null |
    tail -1 | tee -a "$opsf" | sed -n 's/.*"bw_GBps":\([0-9.e+-]*\).*/\1/p'
}
opsf=$(mktemp)
trap 'rm -f "$opsf" "$opsf.ucx"' EXIT
minops() { # the fewest operations a run of this row made (from the JSON lines gw kept)
  sed -n 's/.*"iterations":\([0-9]*\).*/\1/p' "$opsf" | sort -n | head -1
}
max() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{print (a > b ? a : b)}'; }
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{if (b > 0) printf "%.2f", a/b; else print "-"}'; }
echo "# gpuwire batched puts vs one contiguous put and vs UCX (NIXL's pattern), $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), best of $reps x ${dur}s (64 MiB shapes: ${BIG_DUR:-$dur}s), one operation in flight${hp:+, host buffers in huge pages}"
printf '%-6s %-14s %12s %12s %7s %12s %7s %12s %8s\n' transport shape "batch[GB/s]" "contig[GB/s]" ratio "ucx[GB/s]" ratio "batch[Mdesc/s]" "min-ops"
# intra-alloc: intra with both buffers from gw_mem_alloc (shared memory the
# initiator maps and copies into with memcpy, batches and single puts alike)
# intra-get: batched gets against one contiguous get, registered memory
case " $tls " in *" intra "*) arows="${ALLOC_ROWS-intra-alloc} ${GET_ROWS-intra-get}" ;; *) arows="${ALLOC_ROWS-} ${GET_ROWS-}" ;; esac
for t in $tls $arows; do
  case $t in
    tcp) utls=tcp,self ;;
    verbs) utls=rc_verbs,self ;; # with UCX_NET_DEVICES set by the caller (bench/compare/verbs_batch.sh)
    *) utls=sm,self ;;
  esac
  xa=
  [ "$t" = intra-alloc ] && xa=--alloc
  [ "$t" = intra-get ] && xa="--op get"
  [ "$t" != intra-alloc ] && xa="$xa $hp"
  for shape in "256 1K 1024" "4096 16K 16384" "64 1M 1048576"; do
    set -- $shape
    n=$1 s=$2 b=$3
    tot=$((n * b))
    sdur=$dur
    [ "$tot" -ge 16777216 ] && sdur=${BIG_DUR:-$dur}
    bb=0 cb=0 ub=0
    : > "$opsf"
    i=0
    while [ $i -lt "$reps" ]; do
      x=$(gw "$t" --batch "$n" --size "$s" $xa); bb=$(max "$bb" "$x")
      x=$(gw "$t" --size "$tot" $xa); cb=$(max "$cb" "$x")
      if [ -n "$ucx" ] && [ "$n" = 256 ] && [ -z "$(echo $xa)" ]; then
        # only the result line ("ucx N SIZE GB/s ..."): UCX prints its errors on stdout too
        if [ $i = 0 ]; then # which UCX transports carry the puts (UCX's choice moves with the host)
          lanes=$(UCX_TLS=$utls UCX_LOG_LEVEL=info timeout 60 "$ucx" "$n" "$b" 0.1 2>&1 | sed -n 's/.*ep_cfg\[[0-9]*\]: *//p' | tail -1)
          echo "# UCX (UCX_TLS=$utls) for $t: ${lanes:-no ep_cfg line}"
        fi
        x=$(UCX_TLS=$utls timeout 120 "$ucx" "$n" "$b" "$sdur" 2>&1 | tee "$opsf.ucx" | awk '$1 == "ucx" {print $4}')
        if [ -n "$x" ]; then ub=$(max "$ub" "$x"); else
          echo "# UCX (UCX_TLS=$utls) gave no figure: $(grep -v '^ucx ' "$opsf.ucx" | grep -m1 -iE 'error|unreachable|no ' | cut -c1-160)"; fi
      fi
      i=$((i + 1))
    done
    md=$(awk -v g="$bb" -v b="$b" 'BEGIN{printf "%.3f", g * 1e9 / b / 1e6}')
    if [ "$n" = 256 ] && [ -n "$ucx" ] && [ -z "$(echo $xa)" ]; then
      printf '%-6s %-14s %12s %12s %7s %12s %7s %12s %8s\n' "$t" "${n}x$s" "$bb" "$cb" "$(ratio "$bb" "$cb")" "$ub" "$(ratio "$bb" "$ub")" "$md" "$(minops)"
    else
      printf '%-6s %-14s %12s %12s %7s %12s %7s %12s %8s\n' "$t" "${n}x$s" "$bb" "$cb" "$(ratio "$bb" "$cb")" - - "$md" "$(minops)"
    fi
  done
done
