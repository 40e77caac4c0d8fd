#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# kv_post.py of the base build and of this branch, alternated
export FAKECUDA_DEVICES=2 FAKECUDA_KERNEL_NOCOPY=1 GPUWIRE_TRANSPORTS=intra
for r in 1 2 3; do
  for b in base new; do
    if [ $b = base ]; then R=/tmp/kvh/base; else R=/work/wt-kvhost; fi
    echo "## $b round $r"
    (cd $R && GPUWIRE_CUDA_LIB=build/tests/fakecuda/libgwfakecuda.so timeout 300 /usr/bin/python3 bench/compare/kv_post.py --build build --rounds 150 --shapes 16384x2K,tab160x512x4K,4096x16K)
  done
done
