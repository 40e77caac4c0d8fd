#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# names_scale.sh - 1,000 endpoints from several processes connecting lazily
# to one agent while a peer keeps putting to it: by name (gw_peer_regions:
# connect + handshake carrying the agent's table + unpack) against the
# reference of the same storm without names (gw_connect + a key handed over
# out of band), alternating, in one run; prints each run and the medians and
# the ratios (names / reference) of the storm time and of the serving rate.
#
# usage: bench/compare/names_scale.sh [BUILD_DIR]    (default: build)
# env:   REPEAT=3 (runs per mode), ENDPOINTS=1000, PROCS=4,
#        NICE=19 (client processes' nice level; "" for none: on a small
#        machine the clients otherwise take the CPUs the agent needs)
set -u
bld=${1:-build}
prog=$bld/tests/names/names_scale
rep=${REPEAT:-3}
n=${ENDPOINTS:-1000}
p=${PROCS:-4}
[ -x "$prog" ] || { echo "names_scale: $prog not built (make build)" >&2; exit 1; }
export GPUWIRE_TRANSPORTS=tcp GPUWIRE_DIRECTORY= GPUWIRE_PEERS=
[ -n "${NICE-19}" ] && export GWT_SCALE_NICE=${NICE-19}
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "# names_scale: $n endpoints, $p processes, $rep runs per mode, client nice ${GWT_SCALE_NICE:-0}; $(date -u); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$rep"); do
  for mode in names plain; do
    GWT_SCALE_MODE=$mode "$prog" "$n" "$p" > "$tmp/out" 2>&1 || { cat "$tmp/out"; echo "names_scale: $mode run $i failed" >&2; exit 1; }
    storm=$(sed -n 's/.*all within \([0-9.]*\) s.*/\1/p' "$tmp/out")
    p50=$(sed -n 's/.*p50 \([0-9.]*\) s.*/\1/p' "$tmp/out")
    before=$(sed -n 's/.* \([0-9.]*\) MB\/s before.*/\1/p' "$tmp/out")
    during=$(sed -n 's/.*before, \([0-9.]*\) MB\/s during.*/\1/p' "$tmp/out")
    stall=$(sed -n 's/.*longest stall during it \([0-9.]*\) s.*/\1/p' "$tmp/out")
    cpu=$(sed -n 's/.*(\([0-9.]*\) us per endpoint.*/\1/p' "$tmp/out")
    echo "$mode run $i: storm $storm s (p50 $p50 s), serving $before MB/s before, $during MB/s during, longest stall $stall s, agent CPU $cpu us/endpoint"
    echo "$storm $during $before $stall $cpu" >> "$tmp/$mode"
  done
done
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
for mode in names plain; do
  echo "$mode median: storm $(cut -d' ' -f1 "$tmp/$mode" | med) s, serving during $(cut -d' ' -f2 "$tmp/$mode" | med) MB/s (before $(cut -d' ' -f3 "$tmp/$mode" | med)), longest stall $(cut -d' ' -f4 "$tmp/$mode" | med) s, agent CPU $(cut -d' ' -f5 "$tmp/$mode" | med) us/endpoint"
done
ns=$(cut -d' ' -f1 "$tmp/names" | med) ps=$(cut -d' ' -f1 "$tmp/plain" | med)
nd=$(cut -d' ' -f2 "$tmp/names" | med) pd=$(cut -d' ' -f2 "$tmp/plain" | med)
nc=$(cut -d' ' -f5 "$tmp/names" | med) pc=$(cut -d' ' -f5 "$tmp/plain" | med)
awk -v a="$ns" -v b="$ps" -v c="$nd" -v d="$pd" -v e="$nc" -v f="$pc" 'BEGIN {
  printf "ratio names/reference: storm time %.2fx (lower is better), serving rate during the storm %.2fx, agent CPU per endpoint %.2fx\n", a / b, (d > 0 ? c / d : 0), (f > 0 ? e / f : 0) }'
