#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# device_run.sh - the plugin's GPU runs on a GPU host: builds the plugin and
# its driver, runs every nccl_plugin test (CUDA buffers on one GPU shared by
# the two processes: tcp staging and the default transports) and the real
# NCCL load check with the host's libnccl.so.2.  Logs under $OUT.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/nccl-logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=${BUILD:-/tmp/gwn-build}
{ date -u; nvidia-smi -L; nproc; } >"$OUT/host.txt" 2>&1
cat "$OUT/host.txt"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1
cmake --build "$B" -j "$(nproc)" --target nccl-net-gpuwire nccl_plugin_tcp nccl_load_check gwfakecuda \
  >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
lib=${GW_NCCL_LIB:-$(find /usr /opt -name 'libnccl.so.2' 2>/dev/null | head -1)}
echo "libnccl.so.2: ${lib:-none found}"
(cd "$B" && GW_NCCL_LIB=$lib ctest -R nccl_plugin -V --timeout 240) >"$OUT/ctest.log" 2>&1
grep -E "Test +#|tests passed|checked in|: transport |GPU 0|result|FAIL|PASS|CHECK|REQUIRE|SKIP|NCCL version|Loaded net|Using network|NET/gpuwire : (gpuwire|dev 0)" \
  "$OUT/ctest.log" | cut -c1-320
grep -q "100% tests passed" "$OUT/ctest.log"
