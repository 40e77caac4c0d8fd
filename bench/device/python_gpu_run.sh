#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# python_gpu_run.sh - the Python package on a GPU machine in one device call
# of at most ~5 minutes: builds the library, the tool and the _gwfast
# accelerator; runs the GPU suite (python/tests/test_gpu.py), the suites of
# the batched/paged, names, request and peer-event bindings, the KV example
# on CUDA through bench/device/py_kv_loop.sh (the put + put_notify form, the one that
# once stalled, KV_RUNS=20 times, 4 at a time, then the paged form 4 times:
# each run is timed and, past its limit, every Python process of it dumps its
# stack through faulthandler before it is killed), then the paged post bench
# and the per-operation overhead bench.  Logs under $OUT.
#
# usage: bench/device/python_gpu_run.sh [stress]
#   stress: only the KV example, long runs of the put + put_notify mode
#   (KV_ARGS, KV_MODES, KV_LIMIT), then the paged post bench at 64 B and 4 KiB pages
# env: OUT, BUILD=/tmp/gw-build, BUDGET=280 s
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-logs}
BUILD=${BUILD:-/tmp/gw-build}
BUDGET=${BUDGET:-280}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - t0))); }
py=$(command -v python3)
{
  echo "== host"; date -u; uname -r; nproc; uptime
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
  "$py" -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__)'
} >"$OUT/host.txt" 2>&1
cat "$OUT/host.txt"
echo "== build"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_PYTHON="$py" >"$OUT/build.log" 2>&1
cmake --build "$BUILD" -j "$(nproc)" --target gpuwire gpuwire_tool gw_pyfast >>"$OUT/build.log" 2>&1 ||
  echo "build: failed (see build.log)"
grep -E "error|accelerator" "$OUT/build.log" | head -5
rc=0
stress=0
[ "${1:-}" = stress ] && stress=1
run_py() { # name timeout files...
  local name=$1 lim=$2; shift 2
  [ "$(left)" -gt 20 ] || { echo "$name: skipped (device budget)"; return; }
  [ "$lim" -gt "$(left)" ] && lim=$(left)
  timeout "$lim" sh tests/python/run_pytest.sh "$BUILD" "py=$py" "$@" -v >"$OUT/$name.log" 2>&1 || rc=1
  echo "$name: $(grep -E "passed|failed|SKIP" "$OUT/$name.log" | tail -1)"
  grep -E "FAILED|Error" "$OUT/$name.log" | head -8
}
if [ $stress = 0 ]; then
  echo "== GPU suite"
  run_py python-gpu 110 python/tests/test_gpu.py
  echo "== binding suites (batch, names, requests) on this Python"
  run_py python-bindings 60 python/tests/test_batch.py python/tests/test_names.py python/tests/test_requests.py \
    python/tests/test_watch.py
fi
echo "== KV example on CUDA"
if [ $stress = 0 ]; then
  # the put + put_notify form (the one that once stalled) KV_RUNS times, then the paged form
  for m in notify paged; do
    n=$([ $m = notify ] && echo "${KV_RUNS:-20}" || echo "${KV_PAGED_RUNS:-4}")
    [ "$(left)" -gt $(( ${KV_LIMIT:-45} + 60 )) ] || { echo "kv $m: skipped (device budget)"; continue; }
    MODE=$m RUNS=$n PAR=${KV_PAR:-4} LIMIT=${KV_LIMIT:-45} PYTHON="$py" \
      KV_ARGS="--device cuda ${KV_ARGS:---requests 4 --layers 8}" \
      bench/device/py_kv_loop.sh "$BUILD" "$OUT/kv" >"$OUT/kv-$m.txt" 2>&1 || rc=1
    tail -1 "$OUT/kv-$m.txt"
    grep -E "STALL|FAILED" "$OUT/kv-$m.txt" | head -4
  done
else
kv() { # mode limit
  local mode=$1 lim=$2 s e
  s=$(date +%s%N)
  PYTHONFAULTHANDLER=1 LD_LIBRARY_PATH="$BUILD" setsid "$py" python/examples/kv_cache_transfer.py \
    --device cuda ${KV_ARGS:---requests 3 --layers 8} --mode "$mode" >"$OUT/kv.tmp" 2>&1 &
  local pid=$!
  for _ in $(seq $((lim * 10))); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $pid 2>/dev/null; then
    echo "STALL: $mode run past $lim s; stacks:" >>"$OUT/kv.tmp"
    ps -o pid,stat,etime,wchan:20,cmd -s "$(ps -o sid= -p $pid)" >>"$OUT/kv.tmp" 2>&1
    pkill -ABRT -s "$(ps -o sid= -p $pid | tr -d ' ')" 2>/dev/null; sleep 2
    kill -KILL -- -"$pid" 2>/dev/null
    rc=1
  fi
  wait $pid 2>/dev/null
  e=$(date +%s%N)
  printf "%s %d ms: %s\n" "$mode" $(( (e - s) / 1000000 )) "$(grep -E "arrived|STALL|Error|failed" "$OUT/kv.tmp" | head -2 | tr '\n' ' ')" | tee -a "$OUT/kv-runs.txt"
  cat "$OUT/kv.tmp" >>"$OUT/python-examples.log"
}
for m in ${KV_MODES:-notify paged notify notify paged notify}; do
  [ "$(left)" -gt $(( ${KV_LIMIT:-35} + 10 )) ] || { echo "kv: further runs skipped (device budget)"; break; }
  kv $m ${KV_LIMIT:-35}
done
fi
echo "== paged post: Python vs C"
for pg in $([ $stress = 1 ] && echo 64 4096 || echo 4096); do
  [ "$(left)" -gt 40 ] || break
  PAGE=$pg PYTHON="$py" ROUNDS=200 timeout 60 bench/compare/python_pages.sh "$BUILD" 2>&1 | tee "$OUT/python-pages-$pg.log" | grep -vE "^(tensor|list) "
done
echo "== per-operation overhead"
if [ $stress = 0 ] && [ "$(left)" -gt 30 ]; then
  TRANSPORT=intra N=100000 PYTHON="$py" timeout $(( $(left) - 5 )) bench/compare/python_overhead.sh "$BUILD" 2>&1 | tee "$OUT/python-overhead.log" | grep -E "==|binding overhead|put "
fi
echo "== done in $(( $(date +%s) - t0 )) s, rc $rc"
exit $rc
