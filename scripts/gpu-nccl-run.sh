#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gpu-nccl-run.sh - the NCCL plugin on a host with two (or more) GPUs, in one
# go of about 7 minutes: build, the plugin's driver tests, the collective
# benchmark in every configuration (bench/device/nccl_coll.sh), and PyTorch
# all_reduce/all_gather under torchrun over NCCL's socket transport and over
# the plugin (bench/device/torch_coll.py).  Every step runs under `timeout`; a step
# that fails is reported and the next one runs.
#
#   OUT=/some/dir scripts/gpu-nccl-run.sh        (also: scripts/gpu-device-run.sh nccl)
#
# Environment: OUT (default ./gpu-logs), BUILD (default /tmp/gw-build),
# NRANKS (default 2), MAX (largest size, default 256 MiB), RUN_TIMEOUT (per
# benchmark configuration, default 60 s), CONFIGS (bench/device/nccl_coll.sh's list,
# most telling first), BUDGET (seconds for the whole run, default 450: every
# step's limit is cut to what is left, keeping 100 s for PyTorch; benchmark
# configurations that no longer fit are reported as skipped).
# Files under $OUT (few, flat, for hosts that return only a handful):
#   summary.txt  every step's status, the side-by-side bus bandwidth table with
#                ratios to socket, PyTorch's table, what the plugin chose
#   coll.csv     nccl_coll rows of every configuration
#   torch.csv    torch_coll rows
#   host.txt     GPUs, driver, topology, NCCL and PyTorch versions
#   logs.tgz     every log (build, ctest, each configuration, torchrun)
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
# NVSHMEM_DISABLE_NVLS=1).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-logs}
BUILD=${BUILD:-/tmp/gw-build}
NRANKS=${NRANKS:-2}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gw-nccl-logs.XXXXXX")
T0=$(date +%s)
DEADLINE=$((T0 + ${BUDGET:-450}))
declare -a STEPS
step() { # step NAME TIMEOUT LOGFILE CMD... : runs CMD under timeout, records the outcome
  local name=$1 to=$2 log=$3
  shift 3
  local s=$(date +%s)
  local left=$((DEADLINE - s))
  [ "$to" -gt "$left" ] && to=$left
  if [ "$to" -lt 10 ]; then
    STEPS+=("$(printf '%-22s %-14s' "$name" "SKIPPED (time)")"); echo "== $name: skipped, no time left"; return 1
  fi
  echo "== $name (limit ${to}s)"
  timeout -k 10 "$to" "$@" >"$log" 2>&1
  local rc=$?
  local st=ok
  case $rc in 0) ;; 124|137) st="TIMEOUT" ;; *) st="FAILED rc=$rc" ;; esac
  STEPS+=("$(printf '%-22s %-14s %4ss  %s' "$name" "$st" "$(( $(date +%s) - s ))" "$(basename "$log")")")
  echo "   $st after $(( $(date +%s) - s ))s (total $(( $(date +%s) - T0 ))s)"
  return $rc
}

{
  echo "== host"; date -u; uname -r; nproc
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -20
  echo "== NCCL"
  ls -l /usr/local/cuda/lib*/libnccl.so* /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
  grep -h "define NCCL_\(MAJOR\|MINOR\|PATCH\)" /usr/local/cuda/include/nccl.h /usr/include/nccl.h 2>/dev/null
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())' 2>&1
  echo "== network interfaces"; ip -br addr 2>/dev/null || ls /sys/class/net
  for i in /sys/class/net/*; do echo "$(basename "$i") -> $(readlink -f "$i/device" 2>/dev/null)"; done
} >"$OUT/host.txt" 2>&1
head -30 "$OUT/host.txt"

# NCCL for bench/nccl_coll: the system's or the toolkit's, else PyTorch's wheel
ncclroot=${GW_NCCL_ROOT:-}
if [ -z "$ncclroot" ] && [ ! -f /usr/include/nccl.h ] && [ ! -f /usr/local/cuda/include/nccl.h ]; then
  ncclroot=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
echo "NCCL for nccl_coll: ${ncclroot:-system/toolkit}" >>"$OUT/host.txt"
step build 200 "$LOGS/build.log" bash -c "cmake -S . -B '$BUILD' -DCMAKE_BUILD_TYPE=RelWithDebInfo ${ncclroot:+-DGW_NCCL_ROOT=$ncclroot} && cmake --build '$BUILD' -j $(nproc) -- -k"
grep -E "bench/nccl_coll|error:" "$LOGS/build.log" | head -10

step plugin-tests 150 "$LOGS/ctest-nccl.log" bash -c "cd '$BUILD' && ctest -L nccl -j 2 --timeout 150 -V"
grep -E "Test +#|tests passed|tests failed" "$LOGS/ctest-nccl.log" | tail -30

: "${CONFIGS:=socket gw gw-host gw-tcp1 gw-tcp gw-tcp-gpu default gw-gdr gw-intra}"
rm -f "$OUT/coll.csv"
# the benchmark stops starting configurations 100 s before the deadline (PyTorch's share)
step nccl-coll 480 "$LOGS/nccl-coll.log" env BUILD="$BUILD" OUT="$LOGS/coll" NRANKS="$NRANKS" SMALL=1 \
  MAX="${MAX:-268435456}" RUN_TIMEOUT="${RUN_TIMEOUT:-60}" DEADLINE=$((DEADLINE - 100)) bench/device/nccl_coll.sh $CONFIGS
grep -E "^(== |-- |   NET)" "$LOGS/nccl-coll.log" | cut -c1-220
cp "$LOGS/coll/coll.csv" "$OUT/coll.csv" 2>/dev/null

PLUGIN=$(readlink -f "$BUILD/plugin/nccl/libnccl-net-gpuwire.so")
rm -f "$OUT/torch.csv"
TR=(python3 -m torch.distributed.run --standalone --nproc-per-node "$NRANKS" bench/device/torch_coll.py --csv "$OUT/torch.csv"
    --max-bytes "${MAX:-268435456}")
step torch-socket 60 "$LOGS/torch-socket.log" env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket \
  NCCL_NET_PLUGIN=none "${TR[@]}" --label torch-socket
step torch-gw 60 "$LOGS/torch-gw.log" env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET_PLUGIN="$PLUGIN" \
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "${TR[@]}" --label torch-gw

{
  echo "== steps (total $(( $(date +%s) - T0 ))s)"
  printf '  %s\n' "${STEPS[@]}"
  echo "== plugin tests"
  grep -E "^[0-9]+/[0-9]+ Test|tests passed" "$LOGS/ctest-nccl.log" | sed 's/^/  /' | tail -30
  echo "== what the plugin chose (gw configuration)"
  grep -ohE "NET/gpuwire : (dev 0|NCCL_NET_GDR_LEVEL).*|NET/Plugin: Loaded net plugin.*|GPU Direct RDMA (Enabled|Disabled) for GPU 0.*|Using network [a-zA-Z]+" \
    "$LOGS/coll/coll-gw.log" 2>/dev/null | sort -u | cut -c1-240 | sed 's/^/  /'
  cat "$LOGS/coll/coll-summary.txt" 2>/dev/null
  echo "== PyTorch (busbw GB/s; ratio gw/socket)"
  python3 - "$OUT/torch.csv" <<'EOF'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError:
    print("  no torch rows"); sys.exit(0)
bw = {}
for r in rows:
    bw.setdefault((r["coll"], int(r["bytes"])), {})[r["label"]] = (float(r["busbw_GBps"]), int(r["wrong"]))
for k in sorted(bw):
    s, g = bw[k].get("torch-socket"), bw[k].get("torch-gw")
    print("  %-11s %10d  socket %8s  gw %8s  %s%s" % (k[0], k[1], "%.2f" % s[0] if s else "-", "%.2f" % g[0] if g else "-",
          "%.2fx" % (g[0] / s[0]) if s and g and s[0] else "-",
          "  WRONG %d/%d" % (s[1] if s else 0, g[1] if g else 0) if (s and s[1]) or (g and g[1]) else ""))
EOF
  echo "  torch-gw: $(grep -ohE 'NET/Plugin: Loaded net plugin [^ ]+ \(v[0-9]+\)|Using network [A-Za-z]+' "$LOGS/torch-gw.log" 2>/dev/null | sort -u | tr '\n' ';')"
  grep -hE "torch_coll .*: |Error|error" "$LOGS"/torch-*.log 2>/dev/null | grep -v "NCCL INFO" | head -8 | sed 's/^/  /'
} >"$OUT/summary.txt" 2>&1
tar -C "$LOGS" -czf "$OUT/logs.tgz" . 2>/dev/null
rm -rf "$LOGS"
cat "$OUT/summary.txt"
echo "files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
