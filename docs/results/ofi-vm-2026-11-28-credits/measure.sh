#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Send streams and latency over the ofi transport before and after credits
# (flow control of header messages), in one run, alternating, with
# fabtests' fi_rdm_bw as the reference.  Every program under chrt -f 10.
#
# usage: measure.sh BASE_BUILD NEW_BUILD LF26_PREFIX OUTDIR [ROUNDS]
#   BASE_BUILD, NEW_BUILD  build directories holding gpuwire (the tool)
#   LF26_PREFIX            a libfabric 2.6 install with fabtests (bin/fi_rdm_bw)
# Writes OUTDIR/perf.txt (every gpuwire perf output, headed by what ran) and
# OUTDIR/fi_rdm_bw.txt.
set -u
base=$1 new=$2 lf=$3 out=$4 rounds=${5:-3}
mkdir -p "$out"
sizes=8,256,4096,16384,65536
{
  echo "# date: $(date -u '+%F %T UTC'); $(nproc) CPUs; $(uptime)"
  echo "# base: $base; credits: $new (the tree of this script at $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null))"
} | tee "$out/perf.txt" > "$out/fi_rdm_bw.txt"
run_perf() { # lib prov build label args...
  local lib=$1 prov=$2 b=$3 label=$4; shift 4
  echo "## round $r lib=$lib prov=$prov build=$label args: $*" >> "$out/perf.txt"
  if [ "$lib" = 2.6 ]; then
    env GPUWIRE_OFI_LIB=$lf/lib/libfabric.so.1 LD_LIBRARY_PATH=$lf/lib GPUWIRE_TRANSPORTS=ofi \
      GPUWIRE_OFI_PROVIDER=$prov GPUWIRE_OFI_HMEM=off timeout 120 chrt -f 10 "$b/gpuwire" perf --loopback "$@" \
      >> "$out/perf.txt" 2>&1
  else
    env GPUWIRE_TRANSPORTS=ofi GPUWIRE_OFI_PROVIDER=$prov GPUWIRE_OFI_HMEM=off timeout 120 chrt -f 10 \
      "$b/gpuwire" perf --loopback "$@" >> "$out/perf.txt" 2>&1
  fi
  echo "## rc=$? load: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/perf.txt"
}
run_bw() { # prov size iters
  local p=$1 s=$2 n=$3
  echo "## round $r fi_rdm_bw -p $p -S $s -W 32 -I $n (libfabric 2.6)" >> "$out/fi_rdm_bw.txt"
  LD_LIBRARY_PATH=$lf/lib timeout 60 chrt -f 10 "$lf/bin/fi_rdm_bw" -p "$p" -S "$s" -W 32 -I "$n" -E > /dev/null 2>&1 &
  sleep 0.3
  LD_LIBRARY_PATH=$lf/lib timeout 60 chrt -f 10 "$lf/bin/fi_rdm_bw" -p "$p" -S "$s" -W 32 -I "$n" -E 127.0.0.1 \
    >> "$out/fi_rdm_bw.txt" 2>&1
  wait
  sleep 0.3
}
for r in $(seq 1 "$rounds"); do
  for lib in 2.6 1.17; do
    for prov in shm tcp; do
      for bl in "base $base" "credits $new"; do
        set -- $bl
        run_perf $lib $prov "$2" "$1" --duration 1 --op send --size $sizes --busy-poll
        run_perf $lib $prov "$2" "$1" --duration 2 --op send --size 8 --busy-poll --lat-only
      done
    done
  done
  for s in 8 256 4096 16384 65536; do
    run_bw shm $s $([ $s -le 4096 ] && echo 200000 || echo 50000)
    run_bw tcp $s $([ $s -le 4096 ] && echo 50000 || echo 10000)
  done
done
echo "# end: $(date -u '+%F %T UTC'); $(uptime)" >> "$out/perf.txt"
