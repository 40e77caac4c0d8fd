#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nccl_coll.sh - NCCL collectives (bench/device/nccl_coll.c) in several configurations,
# one process per GPU, every result checked; bus bandwidth side by side with
# the ratio of each configuration to NCCL's socket transport.
#
#   bench/device/nccl_coll.sh [CONFIG ...]
#
# Configurations (default: all but default-gdr, in this order):
#   default      NCCL's own paths (NVLink/P2P, SHM): what a user gets without a plugin
#   socket       NCCL's socket transport: NCCL_NET=Socket, P2P and SHM off, no plugin
#   gw           the gpuwire plugin, default transports (intra on one host); the
#                plugin chooses GPU or host buffers (GPUWIRE_NCCL_GPU_BUFFERS=auto:
#                host, as tcp is in the default list)
#   gw-host      the plugin with host buffers (GPUWIRE_NCCL_GPU_BUFFERS=off): NCCL stages
#   gw-gdr       the plugin with GPU buffers forced (GPUWIRE_NCCL_GPU_BUFFERS=on,
#                NCCL_NET_GDR_LEVEL=SYS)
#   gw-intra     intra alone (GPUWIRE_TRANSPORTS=intra), auto buffers (host)
#   gw-tcp       the plugin over tcp (GPUWIRE_TRANSPORTS=tcp), default streams, auto
#                buffers (host)
#   gw-tcp-gpu   the same with GPU buffers (GPUWIRE_NCCL_GPU_BUFFERS=on)
#   gw-tcp-host  the same with host buffers (GPUWIRE_NCCL_GPU_BUFFERS=off)
#   gw-tcp1      tcp with one stream (GPUWIRE_TCP_STREAMS=1)
#   LABEL=BASE,VAR=V,...  configuration BASE with more variables, reported as LABEL
#                (gw-ch8=gw,NCCL_MIN_NCHANNELS=8: the plugin with eight channels)
# Every plugin configuration has NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, so that
# NCCL sends between the ranks of this host through the net plugin.
#
# Environment:
#   BUILD     build tree with nccl_coll and plugin/nccl/libnccl-net-gpuwire.so (default build)
#   OUT       where logs and CSVs go (default $BUILD/nccl-coll)
#   NRANKS    processes, one per GPU (default 2)
#   MIN, MAX  sizes in bytes (default 1 MiB .. 256 MiB);  SMALL=1 adds 1 KiB .. 256 KiB
#   ITERS     iterations per size (default: about 256 MiB moved per size, 3 to 50)
#   COLLS     comma-separated subset of all_reduce,all_gather,reduce_scatter,alltoall,broadcast
#   RUN_TIMEOUT  seconds per configuration (default 150); a configuration that
#             fails or times out is reported and the next one runs
#   DEADLINE  epoch seconds: no configuration runs past it (its limit is cut to
#             what is left; one with under 15 s left is reported as skipped)
# Output: $OUT/coll.csv (label,coll,nranks,bytes,iters,time_us,algbw_GBps,busbw_GBps,wrong),
# $OUT/coll-<config>.log (rank 0's table, every rank's stderr, NCCL's INIT/NET log),
# $OUT/coll-summary.txt (the side-by-side table printed at the end).
# Exit status: 0 when every configuration ran and every result was correct.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and the PyTorch/NVSHMEM switches).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/nccl-coll}
NRANKS=${NRANKS:-2}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$OUT"
BIN=$BUILD/nccl_coll
PLUGIN=$(readlink -f "$BUILD/plugin/nccl/libnccl-net-gpuwire.so" 2>/dev/null || true)
if [ ! -x "$BIN" ]; then
  echo "nccl_coll.sh: $BIN missing: configure with NCCL's headers found (cmake -DGW_NCCL_ROOT=...) and build" >&2
  exit 2
fi
[ -f "$PLUGIN" ] || echo "nccl_coll.sh: no plugin at $BUILD/plugin/nccl/libnccl-net-gpuwire.so: gw configurations will fail" >&2
if [ $# -gt 0 ]; then CONFIGS="$*"; else CONFIGS=${CONFIGS:-"default socket gw gw-host gw-gdr gw-intra gw-tcp gw-tcp-gpu gw-tcp1"}; fi
CSV=$OUT/coll.csv
args=(--nranks "$NRANKS" --csv "$CSV" --min "${MIN:-1048576}" --max "${MAX:-268435456}")
[ "${SMALL:-0}" = 1 ] && args+=(--small)
[ -n "${ITERS:-}" ] && args+=(--iters "$ITERS")
[ -n "${COLLS:-}" ] && args+=(--colls "$COLLS")

# Prints the environment of one configuration, one VAR=value per line.
config_env() {
  # LABEL=BASE,VAR=V,VAR=V...: configuration BASE with more variables, named LABEL
  case $1 in
    *=*) local label=${1%%=*} rest=${1#*=}; local base=${rest%%,*} extra=
      [ "$rest" != "$base" ] && extra=${rest#*,}
      local e; e=$(config_env "$base") || return 1
      echo "$e ${extra//,/ }"; return 0 ;;
  esac
  local net="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
  local gw="$net NCCL_NET_PLUGIN=$PLUGIN"
  case $1 in
    default) echo "NCCL_NET_PLUGIN=none" ;;
    default-gdr) echo "NCCL_NET_PLUGIN=none NCCL_NET_GDR_LEVEL=SYS" ;;
    socket) echo "$net NCCL_NET=Socket NCCL_NET_PLUGIN=none" ;;
    gw) echo "$gw" ;;
    gw-host) echo "$gw GPUWIRE_NCCL_GPU_BUFFERS=off" ;;
    gw-gdr) echo "$gw GPUWIRE_NCCL_GPU_BUFFERS=on NCCL_NET_GDR_LEVEL=SYS" ;;
    gw-intra) echo "$gw GPUWIRE_TRANSPORTS=intra" ;;
    gw-tcp) echo "$gw GPUWIRE_TRANSPORTS=tcp" ;;
    gw-tcp-gpu) echo "$gw GPUWIRE_TRANSPORTS=tcp GPUWIRE_NCCL_GPU_BUFFERS=on" ;;
    gw-tcp-host) echo "$gw GPUWIRE_TRANSPORTS=tcp GPUWIRE_NCCL_GPU_BUFFERS=off" ;;
    gw-tcp1) echo "$gw GPUWIRE_TRANSPORTS=tcp GPUWIRE_TCP_STREAMS=1" ;;
    *) return 1 ;;
  esac
}

LABELS=
for cfg in $CONFIGS; do LABELS="$LABELS ${cfg%%=*}"; done
declare -A STATUS
fail=0
for cfg in $CONFIGS; do
  envs=$(config_env "$cfg") || { echo "nccl_coll.sh: unknown configuration $cfg" >&2; STATUS[$cfg]="unknown"; fail=1; continue; }
  cfg=${cfg%%=*}
  log=$OUT/coll-$cfg.log
  limit=$RUN_TIMEOUT
  if [ -n "${DEADLINE:-}" ]; then
    left=$((DEADLINE - $(date +%s)))
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 15 ]; then
      STATUS[$cfg]="SKIPPED (no time left)"; echo "-- $cfg: ${STATUS[$cfg]}"; fail=1; continue
    fi
  fi
  idf=$(mktemp -u "${TMPDIR:-/tmp}/nccl_coll_id.XXXXXX")
  echo "== $cfg: $envs" | tee "$log"
  start=$(date +%s)
  pids=()
  for ((r = 0; r < NRANKS; r++)); do
    # shellcheck disable=SC2086
    env $envs NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET} \
      timeout -k 5 "$limit" "$BIN" --rank "$r" --device "$r" --id-file "$idf" --label "$cfg" "${args[@]}" \
      >"$log.r$r" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || { c=$?; [ $rc = 0 ] && rc=$c; }; done
  rm -f "$idf"
  for ((r = 0; r < NRANKS; r++)); do
    { echo "---- rank $r"; cat "$log.r$r"; } >>"$log"
    rm -f "$log.r$r"
  done
  secs=$(( $(date +%s) - start ))
  grep -E "^(#|  )" "$log" | grep -v "NCCL INFO" | sed -n '1,200p'
  net=$(grep -oE "Using network [A-Za-z0-9_]+" "$log" | head -1)
  gdr=$(grep -cE "GPU Direct RDMA Enabled" "$log")
  plugin_line=$(grep -oE "NET/gpuwire : dev 0 .*" "$log" | head -1 | cut -c1-200)
  case $rc in
    0) st="ok" ;;
    124|137) st="TIMEOUT after ${limit}s" ;;
    1) st="FAILED (wrong results or NCCL error)" ;;
    2) st="NOT RUN (setup: see log)" ;;
    *) st="FAILED rc=$rc" ;;
  esac
  case $cfg in
    gw*) [ "$net" = "Using network gpuwire" ] || st="$st; plugin NOT used (${net:-no network line})" ;;
  esac
  STATUS[$cfg]="$st; ${net:-?}; GDR-enabled lines $gdr; ${secs}s"
  echo "-- $cfg: ${STATUS[$cfg]}"
  [ -n "$plugin_line" ] && echo "   $plugin_line"
  grep -m3 -E "WARN|error|failed|nccl_coll rank" "$log" | grep -v "NCCL INFO" | cut -c1-240 | sed 's/^/   /'
  [ "$rc" = 0 ] || fail=1
done

# side by side: busbw per configuration, and each one's ratio to socket
{
  echo "== status"
  for cfg in $LABELS; do printf '  %-12s %s\n' "$cfg" "${STATUS[$cfg]:-?}"; done
  python3 - "$CSV" $LABELS <<'EOF'
import csv, sys
path, cfgs = sys.argv[1], sys.argv[2:]
try:
    rows = list(csv.DictReader(open(path)))
except OSError:
    print("no CSV rows"); sys.exit(0)
bw, wrong = {}, {}
for r in rows:
    k = (r["coll"], int(r["bytes"]))
    bw.setdefault(k, {})[r["label"]] = float(r["busbw_GBps"])
    wrong[r["label"]] = wrong.get(r["label"], 0) + int(r["wrong"])
cfgs = [c for c in cfgs if any(c in v for v in bw.values())]
def sz(b):
    for u, n in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= n and b % n == 0: return "%d%s" % (b // n, u)
    return str(b)
ratio_cols = [c for c in cfgs if c.startswith("gw")] if "socket" in cfgs else []
print("== bus bandwidth, GB/s (ratio: to socket)")
print("%-15s %6s " % ("coll", "size") + " ".join("%11s" % c for c in cfgs) + "".join("  %13s" % (c + "/sock") for c in ratio_cols))
for k in sorted(bw, key=lambda k: (k[0], k[1])):
    v = bw[k]
    line = "%-15s %6s " % (k[0], sz(k[1])) + " ".join("%11s" % ("%.2f" % v[c] if c in v else "-") for c in cfgs)
    for c in ratio_cols:
        line += "  %13s" % ("%.2fx" % (v[c] / v["socket"]) if c in v and v.get("socket") else "-")
    print(line)
print("wrong elements per configuration: " + ", ".join("%s %d" % (c, wrong.get(c, 0)) for c in cfgs))
EOF
} | tee "$OUT/coll-summary.txt"
exit $fail
