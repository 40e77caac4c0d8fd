#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# ofi_hmem.sh - GPU memory over the ofi transport through FI_HMEM, on a GPU
# host, with a libfabric built with CUDA that travels with the repository
# (an ignored folder, default .lfcuda: lib/libfabric.so.1, lib/libcudart.so
# where the host has none, bin/fi_info and fabtests' fi_rma_bw and
# fi_rdm_pingpong, include/rdma/ with the libfabric 1.x headers gpuwire
# compiles against).  One run, in order, each step under `timeout`:
#   1. fi_info -p shm / -p tcp with FI_HMEM on RDM endpoints: offered or not
#      (and libfabric's own warnings about loading CUDA);
#   2. builds gpuwire with the ofi transport against those headers
#      (BUILD, default build-ofi-hmem; incremental on a later run);
#   3. the tests it_ofi_hmem_{shm,tcp}[_2gpu] (tests/gpu/ofi_hmem.c: put,
#      get, put_notify, paged and list batches, counted and ordered
#      notifications, messages into and out of GPU memory, every byte
#      checked; each skips with its reason where the provider has no FI_HMEM);
#   4. per provider that moves GPU memory, both buffers GPU 0's memory:
#        put 64 KiB / 1 MiB / 64 MiB [GB/s]  gpuwire perf --loopback --mem cuda --op put
#                                            vs fi_rma_bw -D cuda -o write -U (same window)
#        8 B latency [us, one way]           gpuwire perf --op send and --op put, busy-poll
#                                            vs fi_rdm_pingpong -D cuda -S 8
#      with ratios (bandwidth: gpuwire / tool, >= 0.95 is the goal; latency:
#      gpuwire / tool, <= 1.05).  fi_rma_bw's write test runs both directions
#      at once (its note); gpuwire's put one way.
# Logs under OUTDIR (argument 2, else $OUT, else ./ofi-hmem-logs).
# MEM=host runs the same steps with host buffers (no -D cuda, --mem host):
# the script's own check on a machine without a GPU, and the host-memory
# comparison on a GPU machine.  It sets GPUWIRE_OFI_HMEM=off (unless the
# caller set it), as fabtests without -D ask for no FI_HMEM: libfabric's
# shm provider answers a request with FI_HMEM with inject_size 0, so with
# it every small message pays a send completion that fi_rdm_pingpong's
# fi_inject does not.
#
# usage: bench/device/ofi_hmem.sh [PREFIX] [OUTDIR]     (from the repo root)
# env:   LFCUDA=PREFIX, MEM=cuda|host, PROVIDERS="shm tcp", REPEAT=3 (median),
#        DURATION=1 (s per gpuwire phase), WINDOW=32, PP_ITERS=20000,
#        BW_ITERS="64K:20000 1M:2000 64M:100", BUILD=build-ofi-hmem,
#        BUDGET=330 (s since the start: benchmark rounds that would start later are left out)
set -u
cd "$(dirname "$0")/../.." || exit 1
prefix=${1:-${LFCUDA:-.lfcuda}}
out=${2:-${OUT:-$PWD/ofi-hmem-logs}}
mem=${MEM:-cuda}
provs=${PROVIDERS:-shm tcp}
rep=${REPEAT:-3}
dur=${DURATION:-1}
win=${WINDOW:-32}
ppit=${PP_ITERS:-20000}
bwit=${BW_ITERS:-64K:20000 1M:2000 64M:100}
bld=${BUILD:-build-ofi-hmem}
budget=${BUDGET:-330}
port=${PORT:-12460}
mkdir -p "$out" || exit 1
prefix=$(cd "$prefix" 2>/dev/null && pwd) || { echo "ofi_hmem: no prefix folder ${1:-${LFCUDA:-.lfcuda}}" >&2; exit 1; }
lib=$prefix/lib/libfabric.so.1
[ -f "$lib" ] || { echo "ofi_hmem: $lib missing (the libfabric built with CUDA)" >&2; exit 1; }
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GPUWIRE_OFI_LIB=$lib
fi_info=$prefix/bin/fi_info
dflag="-D cuda"
pmem=cuda
[ "$mem" = host ] && { dflag=""; pmem=host; export GPUWIRE_OFI_HMEM=${GPUWIRE_OFI_HMEM:-off}; }
say() { echo "$*" | tee -a "$out/summary.txt"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print ""}'; }
jget() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
bytes() { case $1 in *K) echo $((${1%K} * 1024)) ;; *M) echo $((${1%M} * 1048576)) ;; *) echo "$1" ;; esac; }
: >"$out/summary.txt"

say "# ofi_hmem: GPU memory over gpuwire's ofi transport (FI_HMEM) against fabtests"
say "# date:      $(date -u '+%Y-%m-%d %H:%M:%S UTC'); memory: $mem"
say "# machine:   $(uname -srm), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
say "# gpus:      $(timeout 20 nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null | tr '\n' ';' || true)"
say "# libfabric: $(timeout 20 "$fi_info" --version 2>&1 | tr '\n' ' ') ($lib)"
say "# cudart:    $([ -f "$prefix/lib/libcudart.so" ] && echo "$prefix/lib/libcudart.so (carried)" || echo "the host's")"
say "# gpuwire:   $(git log --oneline -1 2>/dev/null)"
say "# settings:  GPUWIRE_OFI_HMEM=${GPUWIRE_OFI_HMEM:-auto}"

# 1. does each provider offer FI_HMEM on RDM endpoints?
declare -A hmem
for p in $provs; do
  timeout 30 "$fi_info" -p "$p" -t FI_EP_RDM -c FI_HMEM >"$out/fi_info_$p.txt" 2>&1
  rc=$?
  FI_LOG_LEVEL=warn timeout 30 "$fi_info" -p "$p" -t FI_EP_RDM -c FI_HMEM 2>&1 >/dev/null |
    grep -i "cuda\|hmem" | sed "s/^libfabric:[0-9]*:[0-9]*:://" | sort -u | head -6 >"$out/fi_info_${p}_warn.txt"
  if [ $rc = 0 ] && grep -q '^provider:' "$out/fi_info_$p.txt"; then
    hmem[$p]=1
    say "fi_info $p: FI_HMEM offered ($(sed -n 's/^provider: //p' "$out/fi_info_$p.txt" | sort -u | tr '\n' ' '))"
  else
    hmem[$p]=0
    say "fi_info $p: FI_HMEM not offered (rc $rc: $(tail -1 "$out/fi_info_$p.txt"))"
  fi
  [ -s "$out/fi_info_${p}_warn.txt" ] && sed "s/^/  libfabric warns: /" "$out/fi_info_${p}_warn.txt" | tee -a "$out/summary.txt"
done
# (shm offers FI_HMEM for host memory alone too: what says CUDA works is
# libfabric loading its CUDA support, which warns where it cannot)
if cat "$out"/fi_info_*_warn.txt 2>/dev/null | grep -q 'initialize hmem iface FI_HMEM_CUDA'; then
  say "libfabric CUDA support: NOT loaded (warnings above): GPU memory cannot move through FI_HMEM"
else
  say "libfabric CUDA support: loaded (no warning from its CUDA start)"
fi

# 2. gpuwire with the ofi transport, against the carried headers where the host has none
inc=""
[ -f "$prefix/include/rdma/fi_rma.h" ] && inc="-I$prefix/include"
t0=$SECONDS
if timeout 300 cmake -S . -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_WITH_OFI=ON ${inc:+"-DCMAKE_C_FLAGS=$inc"} \
     >"$out/build.log" 2>&1 &&
   timeout 300 cmake --build "$bld" -j "$(nproc)" --target gpuwire_tool gpu_ofi_hmem >>"$out/build.log" 2>&1; then
  say "build: $bld with the ofi transport ($((SECONDS - t0)) s)"
else
  say "build: FAILED ($((SECONDS - t0)) s): $(grep -m1 -i 'error' "$out/build.log")"
  tail -20 "$out/build.log"
  exit 1
fi
tool=$bld/gpuwire

# 3. the tests (as ctest runs them: tests/integration/ofi_run.sh PROVIDER
# gpu_ofi_hmem [SERVER_GPU]); each line: name, result, its reason or path
prog=$(find "$bld/tests" -name gpu_ofi_hmem -type f -perm -u+x | head -1)
for p in shm tcp; do
  for g in 0 1; do
    t=it_ofi_hmem_$p$([ $g = 1 ] && echo _2gpu)
    timeout 90 sh tests/integration/ofi_run.sh "$p" "$prog" "$g" >"$out/$t.log" 2>&1
    rc=$?
    case $rc in
      0) res=PASS why=$(grep -m1 '^connected over' "$out/$t.log") ;;
      77) res=SKIP why=$(grep -m1 '^SKIP:' "$out/$t.log") ;;
      124) res="FAIL (timed out at 90 s)" why=$(tail -2 "$out/$t.log" | tr '\n' ' ') ;;
      *) res="FAIL (rc $rc)" why=$(grep -m3 -i 'fail\|wrong\|error' "$out/$t.log" | tr '\n' ' ') ;;
    esac
    say "test $t: $res - $(echo "$why" | cut -c1-400)"
  done
done

# 4. benchmarks, per provider that moves GPU memory
gw() { # file, provider, perf args...
  f=$1 p=$2
  shift 2
  [ $SECONDS -gt $((budget + 45)) ] && return
  GPUWIRE_TRANSPORTS=ofi GPUWIRE_OFI_PROVIDER=$p timeout 45 "$tool" perf --loopback --mem "$pmem" \
    --duration "$dur" --json "$@" >>"$out/$f" 2>>"$out/gw_err.log" ||
    echo "gpuwire perf ($p $*) failed: $(tail -1 "$out/gw_err.log")" | tee -a "$out/summary.txt" >&2
}
fab() { # file, column, program, args... (server, then client on a port of its own)
  f=$1 col=$2 prog=$3
  shift 3
  [ $SECONDS -gt $((budget + 45)) ] && return
  port=$((port + 1))
  timeout 40 "$prefix/bin/$prog" "$@" -s 127.0.0.1 -B "$port" >>"$out/fab_server.log" 2>&1 &
  srv=$!
  sleep 0.5
  timeout 40 "$prefix/bin/$prog" "$@" -P "$port" 127.0.0.1 2>>"$out/fab_err.log" | tee -a "$out/fab_raw.log" |
    awk -v c="$col" '$1 ~ /^[0-9]/ {print $c}' >>"$out/$f"
  wait "$srv"
}
ran=""
for p in $provs; do
  if [ "${hmem[$p]}" != 1 ] && [ "$mem" = cuda ]; then
    say "bench $p: not run (the provider offers no FI_HMEM: GPU memory cannot move over it)"
    continue
  fi
  ran="$ran $p"
  for i in $(seq "$rep"); do
    if [ $SECONDS -gt "$budget" ]; then
      say "bench $p: round $i and later left out (past BUDGET=$budget s at $SECONDS s)"
      break
    fi
    for e in $bwit; do
      s=${e%%:*} it=${e#*:}
      gw "gw_${p}_bw_$s" "$p" --op put --size "$s" --window "$win" --bw-only
      fab "fab_${p}_bw_$s" 5 fi_rma_bw -p "$p" -e rdm -o write -U -W "$win" -S "$(bytes "$s")" -I "$it" $dflag
    done
    gw "gw_${p}_lat_send" "$p" --op send --size 8 --lat-only --busy-poll
    gw "gw_${p}_lat_put" "$p" --op put --size 8 --lat-only --busy-poll
    fab "fab_${p}_lat" 6 fi_rdm_pingpong -p "$p" -S 8 -I "$ppit" $dflag
  done
done
row() { printf '%-4s %-34s %10s  %-36s %10s %6s\n' "$@" | tee -a "$out/summary.txt"; }
[ -n "$ran" ] && row prov measurement gpuwire reference ref ratio
for p in $ran; do
  for e in $bwit; do
    s=${e%%:*}
    g=$(jget bw_GBps <"$out/gw_${p}_bw_$s" 2>/dev/null | median)
    f=$([ -s "$out/fab_${p}_bw_$s" ] && awk '{printf "%.4f\n", $1 / 1000}' "$out/fab_${p}_bw_$s" | median)
    row "$p" "put $s $mem [GB/s]" "${g:--}" "fi_rma_bw ${dflag:+$dflag }-o write -U" "${f:--}" "$(ratio "$g" "$f")"
  done
  f=$([ -s "$out/fab_${p}_lat" ] && median <"$out/fab_${p}_lat")
  for k in send put; do
    g=$(jget lat_us_avg <"$out/gw_${p}_lat_$k" 2>/dev/null | median)
    row "$p" "$k 8 B $mem latency [us]" "${g:--}" "fi_rdm_pingpong ${dflag:+$dflag }-S 8" "${f:--}" "$(ratio "$g" "$f")"
  done
  path=$(sed -n 's/.*"path":"\([^"]*\)".*/\1/p' "$out/gw_${p}_bw_$(echo "$bwit" | awk '{print $1}' | cut -d: -f1)" 2>/dev/null | head -1)
  say "path $p: ${path:-(no gpuwire row)}"
done
say "# done in $SECONDS s; logs in $out"
