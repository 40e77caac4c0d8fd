#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# weight_sync_run.sh - bench/peers/weight_sync.py on a GPU machine in one
# device call: installs the carried wheels (.ce/*.whl: checkpoint-engine and
# what it needs beyond the machine's image) into $SITE, builds libgpuwire
# and the Python accelerator, then runs gpuwire (one put per tensor, and one
# put_batch), torch.distributed broadcast and checkpoint-engine (NCCL
# broadcast path with its default bucket limit and with 1 GiB buckets; P2P
# path where Mooncake and an RDMA device exist) on the same ~4 GB of bf16
# tensors from GPU 0 to GPUs 1..N-1, then gpuwire alone to EXTRA_RECEIVERS
# receiver processes (several per GPU).  Expected wall time on two GPUs:
# about 2 minutes.  Every step has a timeout; a step that fails says so and
# the next one still runs.
#
# usage: bench/device/weight_sync_run.sh [extra weight_sync.py arguments]
# env: OUT (logs; default ./gpu-logs), BUILD=/tmp/gw-build, SITE=/tmp/site,
#      WHEELS=.ce, EXTRA_RECEIVERS=3 (0: skip the several-per-GPU run),
#      LIMIT=330 (seconds for the main run), BUDGET=560 (seconds for the whole
#      script: every step's timeout is cut to what is left), CE_BUCKETS=0,1,
#      PY (default: python3)
# files under $OUT: host.txt, setup.log, weight_sync.log, weight_sync.txt,
# weight_sync.json, multi/weight_sync.txt, multi/weight_sync.json
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-logs}
BUILD=${BUILD:-/tmp/gw-build}
SITE=${SITE:-/tmp/site}
WHEELS=${WHEELS:-.ce}
EXTRA_RECEIVERS=${EXTRA_RECEIVERS:-3}
LIMIT=${LIMIT:-330}
BUDGET=${BUDGET:-560}
CE_BUCKETS=${CE_BUCKETS:-0,1}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
py=${PY:-$(command -v python3)}
t0=$(date +%s)
lim() { # the step's own limit, or what is left of BUDGET if less (at least 5 s)
  local left=$((BUDGET - ($(date +%s) - t0)))
  [ "$left" -lt "$1" ] && set -- "$left"
  [ "$1" -lt 5 ] && set -- 5
  echo "$1"
}
{
  echo "== host"; date -u; uname -r; nproc; uptime
  timeout 20 nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
  timeout 20 nvidia-smi topo -m 2>&1 | head -8
  ls /sys/class/infiniband 2>&1 | head -3
  timeout 60 "$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__,
      "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} >"$OUT/host.txt" 2>&1
cat "$OUT/host.txt"

echo "== wheels ($WHEELS)" | tee "$OUT/setup.log"
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  ls "$WHEELS"/*.whl >>"$OUT/setup.log"
  if timeout "$(lim 120)" "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$SITE" "$WHEELS"/*.whl >>"$OUT/setup.log" 2>&1; then
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
    timeout 60 "$py" -c 'import checkpoint_engine as c, zmq, pydantic, fastapi;
print("checkpoint-engine", c.__version__, "pyzmq", zmq.__version__, "pydantic", pydantic.__version__)' \
      2>&1 | tail -3 | tee -a "$OUT/setup.log"
  else
    echo "pip install failed (setup.log); the checkpoint-engine columns will report why" |
      tee -a "$OUT/setup.log"
    tail -5 "$OUT/setup.log"
  fi
else
  echo "no $WHEELS/*.whl: the checkpoint-engine columns will report it not installed" |
    tee -a "$OUT/setup.log"
fi

echo "== build ($BUILD)" | tee -a "$OUT/setup.log"
if ! { timeout "$(lim 60)" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_PYTHON="$py" &&
       timeout "$(lim 240)" cmake --build "$BUILD" -j "$(nproc)" --target gpuwire gw_pyfast; } \
     >>"$OUT/setup.log" 2>&1; then
  echo "build failed:"; grep -E "error|Error" "$OUT/setup.log" | head -10
  exit 1
fi
echo "built in $(($(date +%s) - t0)) s"

machine="$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
if [ -n "$machine" ]; then machine="$machine x$(timeout 20 nvidia-smi -L | wc -l)"; else machine="$(hostname) (no GPU)"; fi
echo "== weight sync: gpuwire, torch, checkpoint-engine ($machine)"
set -o pipefail
timeout -k 10 "$(lim "$LIMIT")" "$py" bench/peers/weight_sync.py --build "$BUILD" --out "$OUT" \
  --machine "$machine" --ce-bucket-gb "$CE_BUCKETS" --gpuwire-mode puts,batch --timeout 90 \
  --column-timeout 150 "$@" \
  2>&1 | tee "$OUT/weight_sync.log"
rc=$?
[ $rc -eq 0 ] || echo "weight_sync.py exited $rc"

if [ "$EXTRA_RECEIVERS" -gt 0 ] && [ "$(lim 100)" -ge 60 ]; then
  echo "== gpuwire alone, $EXTRA_RECEIVERS receivers"
  timeout -k 10 "$(lim 100)" "$py" bench/peers/weight_sync.py --build "$BUILD" --out "$OUT/multi" \
    --machine "$machine" --peers gpuwire --receivers "$EXTRA_RECEIVERS" --timeout 60 \
    --column-timeout 90 "$@" 2>&1 | tee -a "$OUT/weight_sync.log" | grep -E "^(gpuwire|weight sync|placement|\|)"
  [ $? -eq 0 ] || echo "the several-receiver run failed (weight_sync.log)"
fi
echo "== done in $(($(date +%s) - t0)) s"
exit $rc
