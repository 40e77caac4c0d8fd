#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu-suite-run.sh - one device call on a two-GPU host: the GPU test suite
# (scripts/gpu-device-run.sh tests), bench/device/gpu_bench.sh, and PyTorch
# collectives over the NCCL plugin against NCCL's socket transport
# (bench/device/torch_coll.py), logs under $OUT.  NVLink multicast stays off.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-logs}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUILD=${BUILD:-/tmp/gw-build}
timeout 240 scripts/gpu-device-run.sh tests 2>&1 | tail -50
PLUGIN=$(readlink -f "$BUILD/plugin/nccl/libnccl-net-gpuwire.so")
TR=(python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/device/torch_coll.py --csv "$OUT/torch.csv" --max-bytes 268435456)
timeout 90 env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_NET_PLUGIN=none "${TR[@]}" --label torch-socket >"$OUT/torch-socket.log" 2>&1; echo "torch-socket rc=$?"
timeout 90 env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET_PLUGIN="$PLUGIN" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "${TR[@]}" --label torch-gw >"$OUT/torch-gw.log" 2>&1; echo "torch-gw rc=$?"
grep -ohE "NET/Plugin: Loaded net plugin [^ ]+ \(v[0-9]+\)|Using network [A-Za-z]+" "$OUT/torch-gw.log" | sort -u
cat "$OUT/torch.csv" 2>/dev/null
BUILD="$BUILD" timeout 200 bench/device/gpu_bench.sh >"$OUT/gpu_bench.log" 2>&1; echo "gpu_bench rc=$?"
tail -60 "$OUT/gpu_bench.log"
