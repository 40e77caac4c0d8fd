#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The delivered rate of a send stream (delivered.c: the receiver times N
# messages from its first receive to its last, 32 receives posted ahead,
# the sender keeping 32 sends outstanding), before and after credits.
# gpuwire perf's send ops/s stops its clock when the sender's sends have
# completed locally, which over tcp counts messages still in the provider's
# buffers; this counts them at the receiver.
# usage: delivered.sh DLV_BASE DLV_NEW LF26_PREFIX OUT [ROUNDS]
#   DLV_*: delivered.c built against each library (see README.md)
set -u
base=$1 new=$2 lf=$3 out=$4 rounds=${5:-3}
echo "# date: $(date -u '+%F %T UTC'); $(nproc) CPUs; $(uptime)" > "$out"
for r in $(seq 1 "$rounds"); do
  for lib in 2.6 1.17; do
    for prov in shm tcp; do
      for s in 8 256 4096; do
        for b in base new; do
          bin=$([ $b = base ] && echo "$base" || echo "$new")
          n=200000
          [ $b = base ] && [ $lib = 2.6 ] && [ $prov = shm ] && [ $s -lt 4096 ] && n=50000
          echo "## round $r lib=$lib prov=$prov size=$s build=$b n=$n" >> "$out"
          if [ $lib = 2.6 ]; then
            env GPUWIRE_OFI_LIB=$lf/lib/libfabric.so.1 LD_LIBRARY_PATH=$lf/lib GPUWIRE_TRANSPORTS=ofi \
              GPUWIRE_OFI_PROVIDER=$prov GPUWIRE_OFI_HMEM=off timeout 120 chrt -f 10 "$bin" $n $s >> "$out" 2>&1
          else
            env GPUWIRE_TRANSPORTS=ofi GPUWIRE_OFI_PROVIDER=$prov GPUWIRE_OFI_HMEM=off timeout 120 chrt -f 10 \
              "$bin" $n $s >> "$out" 2>&1
          fi
        done
      done
    done
  done
done
echo "# end: $(date -u '+%F %T UTC'); $(uptime)" >> "$out"
