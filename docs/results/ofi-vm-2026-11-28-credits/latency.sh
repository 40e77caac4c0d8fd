#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# 8-byte send latency over ofi shm and tcp, before and after credits,
# alternating, ROUNDS rounds: gpuwire perf --loopback --op send --size 8
# --lat-only --busy-poll --duration 2 under chrt -f 10.
# usage: latency.sh BASE_BUILD NEW_BUILD LF26_PREFIX OUT [ROUNDS]
set -u
base=$1 new=$2 lf=$3 out=$4 rounds=${5:-7}
echo "# date: $(date -u '+%F %T UTC'); $(nproc) CPUs; $(uptime)" > "$out"
for r in $(seq 1 "$rounds"); do
  for lib in 2.6 1.17; do
    for prov in shm tcp; do
      for bl in "base $base" "credits $new"; do
        set -- $bl
        echo "## round $r lib=$lib prov=$prov build=$1 args: --lat-only" >> "$out"
        if [ $lib = 2.6 ]; then
          env GPUWIRE_OFI_LIB=$lf/lib/libfabric.so.1 LD_LIBRARY_PATH=$lf/lib GPUWIRE_TRANSPORTS=ofi \
            GPUWIRE_OFI_PROVIDER=$prov GPUWIRE_OFI_HMEM=off timeout 60 chrt -f 10 "$2/gpuwire" perf --loopback \
            --duration 2 --op send --size 8 --busy-poll --lat-only 2>&1 | grep -E '^8 ' >> "$out"
        else
          env GPUWIRE_TRANSPORTS=ofi GPUWIRE_OFI_PROVIDER=$prov GPUWIRE_OFI_HMEM=off timeout 60 chrt -f 10 \
            "$2/gpuwire" perf --loopback --duration 2 --op send --size 8 --busy-poll --lat-only 2>&1 | grep -E '^8 ' >> "$out"
        fi
      done
    done
  done
done
echo "# end: $(date -u '+%F %T UTC'); $(uptime)" >> "$out"
