#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# alternate the base build and this branch's: the tight per-call loop (loop.py) and the C benches
OUT=/work/wt-kvhost/docs/results/vm-2026-11-28-kv-host
export FAKECUDA_DEVICES=2 FAKECUDA_KERNEL_NOCOPY=1 GPUWIRE_TRANSPORTS=intra
for r in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then R=/tmp/kvh/base; else R=/work/wt-kvhost; fi
    export GPUWIRE_CUDA_LIB=$R/build/tests/fakecuda/libgwfakecuda.so
    echo "## $b round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    ROOT=$R SHAPES=16384x2K,tab160x512x4K,4096x16K ROUNDS=1000 timeout 300 /usr/bin/python3 /tmp/kvh/loop.py
    (cd $R && KV_PAGES_BENCH=1 build/tests/fakecuda/fakecuda_kv_pages 2>&1 | grep "bench")
    (cd $R && KV_TABLES_BENCH=1 KV_TABLES_ROUNDS=200 build/tests/fakecuda/fakecuda_kv_tables 2>&1 | grep "bench")
  done
done
