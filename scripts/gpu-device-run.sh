#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu-device-run.sh - builds gpuwire and runs its GPU tests and GPU benchmarks
# on a GPU host (written for the two-H200 NVLink machine), logging under
# $OUT (default ./gpu-logs).  Usage: scripts/gpu-device-run.sh [tests|bench|topo|all]
#   tests: ctest -L gpu plus the intra-host tests (every op, 1 B .. 1 GiB)
#   topo:  gpuwire info --topo (text, JSON), gpuwire doctor (text, JSON) and a
#          recording of this machine's sysfs (scripts/record-sysfs.sh) for the fixtures
#   bench: bench/device/gpu_bench.sh (intra put vs cuMemcpyPeer vs NCCL, tcp vs NCCL sockets,
#          staged vs direct)
#   python: the Python package (lib only built): its GPU suite (python/tests/test_gpu.py),
#          its CPU suites, the binding's overhead bench and both examples on CUDA
#   nccl:  scripts/gpu-nccl-run.sh (two GPUs or more): the plugin's tests, bench/device/nccl_coll.sh in
#          every configuration and PyTorch collectives over the plugin vs NCCL's sockets
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0): it can take shared GPUs down.
set -u
what=${1:-all}
cd "$(dirname "$0")/.."
[ "$what" = nccl ] && exec scripts/gpu-nccl-run.sh
OUT=${OUT:-$PWD/gpu-logs}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUILD=${BUILD:-/tmp/gw-build}
{
  echo "== host"; date -u; uname -r; nproc
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -20
} >"$OUT/host.txt" 2>&1
cat "$OUT/host.txt"
echo "== build"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$OUT/build.log" 2>&1
[ "$what" = python ] && targets="--target gpuwire gpuwire_tool gw_pyfast" || targets=
cmake --build "$BUILD" -j "$(nproc)" $targets -- -k >>"$OUT/build.log" 2>&1 || echo "build: some targets failed (see build.log)"
grep -E "error|warning:" "$OUT/build.log" | head -20
"$BUILD/gpuwire" info --all >"$OUT/info.txt" 2>&1; grep -iE "cuda|intra|gpu" "$OUT/info.txt" | head -12
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== tests"
  (cd "$BUILD" && ctest -L "gpu|intra" ${GW_CTEST_EXCLUDE:+-E "$GW_CTEST_EXCLUDE"} -V --timeout ${GW_CTEST_TIMEOUT:-300} 2>&1) >"$OUT/tests.log"; grep -E "Test +#|tests passed|SKIP|CHECK|REQUIRE|returned" "$OUT/tests.log" | tail -60
  grep -q "tests passed, 0 tests failed\|100% tests passed" "$OUT/tests.log" || rc=1
fi
if [ "$what" = topo ] || [ "$what" = all ]; then
  echo "== topology and doctor"
  "$BUILD/gpuwire" info --topo >"$OUT/topo.txt" 2>&1; cat "$OUT/topo.txt"
  "$BUILD/gpuwire" info --topo --json >"$OUT/topo.json" 2>&1
  nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
  "$BUILD/gpuwire" doctor -v >"$OUT/doctor.txt" 2>&1; echo "doctor exit $?" >>"$OUT/doctor.txt"; cat "$OUT/doctor.txt"
  "$BUILD/gpuwire" doctor --json >"$OUT/doctor.json" 2>&1
  rec=$(mktemp -d)
  if scripts/record-sysfs.sh "$rec/rec" >/dev/null 2>&1; then
    tar -C "$rec" -czf "$OUT/sysfs-record.tgz" rec && echo "sysfs recorded: $(du -h "$OUT/sysfs-record.tgz" | cut -f1)"
    GPUWIRE_SYSFS_ROOT="$rec/rec/sys" "$BUILD/gpuwire" info --topo >"$OUT/topo-from-record.txt" 2>&1 || true
  fi
  rm -rf "$rec"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== bench"
  BUILD="$BUILD" bench/device/gpu_bench.sh 2>&1 | tee "$OUT/bench.log" | tail -80
fi
if [ "$what" = python ]; then
  py=$(command -v python3)
  echo "== python ($py): GPU suite"
  timeout 300 sh tests/python/run_pytest.sh "$BUILD" "py=$py" python/tests/test_gpu.py -v >"$OUT/python-gpu.log" 2>&1 || rc=1
  grep -E "PASS|FAIL|SKIP|Error|passed|failed" "$OUT/python-gpu.log" | tail -12
  echo "== python: CPU suites"
  timeout 120 sh tests/python/run_pytest.sh "$BUILD" "py=$py" python/tests/test_api.py python/tests/test_ops.py \
    python/tests/test_errors.py python/tests/test_store.py >"$OUT/python-cpu.log" 2>&1 || rc=1
  tail -2 "$OUT/python-cpu.log"
  echo "== python: overhead bench"
  for t in intra tcp; do TRANSPORT=$t PYTHON="$py" timeout 60 bench/compare/python_overhead.sh "$BUILD"; done 2>&1 | tee "$OUT/python-overhead.log"
  echo "== python: examples on CUDA"
  { LD_LIBRARY_PATH="$BUILD" timeout 90 "$py" python/examples/kv_cache_transfer.py --device cuda --requests 2 &&
    LD_LIBRARY_PATH="$BUILD" timeout 90 "$py" python/examples/weight_sync.py --device cuda --inference 2 --steps 2; } \
    >"$OUT/python-examples.log" 2>&1 || rc=1
  grep -vE "^\s" "$OUT/python-examples.log" | tail -8
fi
exit $rc
