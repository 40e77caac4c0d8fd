#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# one_gpu_probe.sh - where small-transfer latency goes when both processes of
# a gpuwire pair use one GPU.  One run, side by side:
#   1. a plain CUDA ping-pong with no gpuwire (bench/device/gpu_ipc_pingpong.c): two
#      processes vs two threads of one process, IPC copy vs local copy vs
#      device-to-host, four ways of waiting, and "half" (only one side
#      touches the GPU), so the cost of switching the GPU between two
#      processes' contexts shows up on its own;
#   2. `gpuwire perf --loopback --lat-only` over intra and tcp with host and
#      GPU memory, spinning and --busy-poll, to put gpuwire's figure beside
#      the plain one.
# Usage: BUILD=build bench/device/one_gpu_probe.sh   (needs a built tree; GPU 0)
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
ITERS=${ITERS:-2000}
B=$BUILD/gpu-bench
mkdir -p "$B"
CC=${CC:-cc}
[ -f "$BUILD/libgpuwire.a" ] || { echo "one_gpu_probe: $BUILD/libgpuwire.a missing: build first"; exit 1; }
# the library may need libcrypto (HMAC authentication) when built with it
for extra in -lcrypto ""; do
  $CC -O2 -Wall -Iinclude -Isrc bench/device/gpu_ipc_pingpong.c -o "$B/gpu_ipc_pingpong" "$BUILD/libgpuwire.a" \
    -ldl -lpthread -lm $extra 2>"$B/pp_build.log" && break
done
[ -x "$B/gpu_ipc_pingpong" ] || { cat "$B/pp_build.log"; exit 1; }
P=$B/gpu_ipc_pingpong
echo "== host: $(date -u) $(uname -r) $(nproc) CPUs"
nvidia-smi --query-gpu=index,name,driver_version,compute_mode --format=csv,noheader 2>&1
echo "== plain CUDA ping-pong, one GPU (${ITERS} round trips each; us)"
pp() { timeout 60 "$P" --iters "$ITERS" "$@" || echo "PINGPONG $* failed (exit $?)"; }
pp --mode proc --copy none
for mode in proc thread; do
  for copy in dd local dh; do
    for wait in event stream sync memcpy; do
      pp --mode $mode --copy $copy --wait $wait --size 8
    done
  done
done
pp --mode proc --copy dd --wait event --size 8 --half
pp --mode proc --copy dh --wait event --size 8 --half
pp --mode proc --copy dh --wait memcpy --size 8 --half
for mode in proc thread; do
  for wait in event memcpy null; do
    pp --mode $mode --copy hd --wait $wait --size 8
  done
done
pp --mode proc --copy dd --wait null --size 8
for s in 4096 65536 262144 1048576 4194304; do
  for wait in event memcpy; do
    pp --mode proc --copy dd --wait $wait --size $s
    pp --mode proc --copy hd --wait $wait --size $s
  done
  pp --mode proc --copy dh --wait event --size $s
  pp --mode thread --copy dd --wait event --size $s
done
echo "== the same with CUDA_DEVICE_MAX_CONNECTIONS=1"
CUDA_DEVICE_MAX_CONNECTIONS=1 pp --mode proc --copy dd --wait event --size 8
CUDA_DEVICE_MAX_CONNECTIONS=1 pp --mode proc --copy dh --wait event --size 8
echo "== gpuwire perf --loopback --lat-only, one GPU"
gp() { echo "-- $*"; timeout 120 "$BUILD/gpuwire" perf --loopback --lat-only --duration 0.3 "$@" 2>&1 | grep -v "^ *$"; }
for t in intra tcp; do
  for mem in cuda:0 host; do
    GPUWIRE_TRANSPORTS=$t gp --mem $mem --op put --size 8,4K,64K,256K,1M,4M
    GPUWIRE_TRANSPORTS=$t gp --mem $mem --op put --size 8,4K,64K,256K,1M,4M --busy-poll
  done
  GPUWIRE_TRANSPORTS=$t gp --mem cuda:0 --op send --size 8,4K,64K --busy-poll
  GPUWIRE_TRANSPORTS=$t gp --mem cuda:0 --op get --size 8,4K,64K --busy-poll
done
