#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# nixl_vram.sh - the GPUWIRE NIXL backend with VRAM segments on a GPU machine,
# in one device call of about a minute and a half:
#   1. installs the carried nixl wheel(s) into a fresh folder with pip
#      (--no-index --no-deps --target; no network needed) and puts the
#      carried libplugin_GPUWIRE.so alone in a fresh NIXL_PLUGIN_DIR;
#   2. tests/nixl/nixl_kv_test.py --vram over intra (CUDA IPC) and over tcp
#      (staged through host memory): torch CUDA tensors, the prefill agent's
#      on GPU 0 and the decode agent's on GPU 1 when there are two GPUs;
#      WRITE by descriptor index with a notification (every block checked
#      when it arrives), READ both ways, metadata reload;
#   3. the same test in host memory (DRAM) over intra and tcp;
#   4. bench/compare/nixl_overhead.py --vram over intra and tcp: the same
#      descriptor WRITEs through NIXL's agent with GPUWIRE and through
#      gpuwire's own Python API (libgpuwire built here, in the background
#      while 2-3 run).
# Without CUDA in torch the VRAM parts print SKIP with the reason and the
# measurement is skipped; that is not a failure.  Exit 0 when nothing failed.
#
# usage: bench/device/nixl_vram.sh [CARRY_DIR]
#   CARRY_DIR (default .nixl at the repository root, not committed) holds the
#   nixl wheel(s) for this machine's Python (nixl-cu12 or nixl-cu13, and
#   optionally the nixl meta package) and libplugin_GPUWIRE.so built against
#   NIXL's headers (docs/NIXL.md, "Build").
# env: OUT (logs; default ./nixl-vram-logs), PYTHON=python3, SITE=/tmp/gw-nixl-site,
#      BUILD=/tmp/gw-nixl-build, BUDGET=110 (s; the measurement is cut to fit)
# Logs under $OUT (8 files): env.txt (host, carried files, install, the
# plugin's ldd), kv-vram-intra.log, kv-vram-tcp.log, kv-dram.log, build.log,
# overhead-vram-intra.log, overhead-vram-tcp.log, summary.txt.
set -u
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
OUT=${OUT:-$root/nixl-vram-logs}
py=${PYTHON:-python3}
site=${SITE:-/tmp/gw-nixl-site}
BUILD=${BUILD:-/tmp/gw-nixl-build}
BUDGET=${BUDGET:-110}
mkdir -p "$OUT"
t0=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - t0))); }
rc=0
sum="$OUT/summary.txt"
: >"$sum"
say() { echo "$*" | tee -a "$sum"; }
fail() { say "FAIL: $*"; rc=1; }

carry=${1:-.nixl}
if ! carry=$(cd "$carry" 2>/dev/null && pwd); then
    say "FAIL: no carry folder '${1:-.nixl}' (the nixl wheel(s) and libplugin_GPUWIRE.so; docs/NIXL.md)"
    exit 1
fi
plugin=$carry/libplugin_GPUWIRE.so
env_log="$OUT/env.txt"
{
    echo "== host"; date -u; uname -srm; nproc; uptime
    ldd --version 2>&1 | head -1
    nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,memory.total --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -8
    echo "== carried ($carry)"
    ls -l "$carry"
    sha256sum "$carry"/* 2>&1
} >"$env_log" 2>&1

# torch, and how many GPUs it sees (the VRAM parts need one)
ngpu=$("$py" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>>"$env_log" |
    tail -n 1)
case $ngpu in '' | *[!0-9]*) ngpu=0 ;; esac
"$py" -c 'import sys, numpy; print("python", sys.version.split()[0], "numpy", numpy.__version__)' >>"$env_log" 2>&1
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
          "available", torch.cuda.is_available(), "devices", torch.cuda.device_count())' >>"$env_log" 2>&1
say "== $(date -u +%FT%TZ) $(uname -n): $("$py" -V 2>&1), $ngpu GPU(s) visible to torch"

# the gpuwire library and its Python accelerator, for the measurement's
# gpuwire column: built in the background while the tests run
build_pid=
if [ "$ngpu" -gt 0 ] && command -v cmake >/dev/null 2>&1; then
    (cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGW_PYTHON="$(command -v "$py")" -DGW_NIXL=OFF &&
        cmake --build "$BUILD" -j "$(nproc)" --target gpuwire gw_pyfast) >"$OUT/build.log" 2>&1 &
    build_pid=$!
elif [ "$ngpu" -gt 0 ]; then
    echo "no cmake on this machine" >"$OUT/build.log"
fi

# 1. the carried wheels and plugin
rm -rf "$site"
mkdir -p "$site"
(
    echo "== install into $site"
    if ! "$py" -m pip install -q --no-index --no-deps --target "$site" "$carry"/*.whl; then
        # no pip, or pip refused: a wheel is a zip whose top level is what
        # --target gets (the wheel's tags are not checked this way)
        echo "(pip failed for $py: unpacking the wheels instead)"
        rm -rf "$site" && mkdir -p "$site" || exit 1
        for w in "$carry"/*.whl; do "$py" -m zipfile -e "$w" "$site" || exit 1; done
    fi
) >>"$env_log" 2>&1 || fail "installing the carried wheels (env.txt)"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
plugdir=$(mktemp -d "${TMPDIR:-/tmp}/gw-nixl-plugins.XXXXXX")
trap 'rm -rf "$plugdir"' EXIT
if [ -f "$plugin" ]; then
    cp "$plugin" "$plugdir/"
else
    fail "no libplugin_GPUWIRE.so in $carry"
fi
export NIXL_PLUGIN_DIR=$plugdir # GPUWIRE is the only backend NIXL finds
{
    echo "== ldd libplugin_GPUWIRE.so"
    ldd "$plugin" 2>&1
    echo "== NIXL's Python API"
    "$py" tests/nixl/nixl_api.py 2>&1
} >>"$env_log"
grep -q "not found" <(ldd "$plugin" 2>&1) && fail "the plugin misses a library (env.txt)"
if ! api=$("$py" tests/nixl/nixl_api.py 2>&1); then
    fail "cannot import NIXL's Python API: $(echo "$api" | tail -n 1)"
    say "== done in $(($(date +%s) - t0)) s, rc $rc"
    exit $rc
fi
say "NIXL Python API: $api; plugin $(stat -c %s "$plugin") bytes"

# 2-3. the KV test: name, transport, args; appends to the named log
kv() {
    local name=$1 tr=$2 log=$OUT/$1.log part r
    shift 2
    part=$(mktemp)
    echo "== GPUWIRE_TRANSPORTS=$tr nixl_kv_test.py $*" >"$part"
    GPUWIRE_TRANSPORTS=$tr GPUWIRE_NIXL_XFER_LOG=on PYTHONFAULTHANDLER=1 \
        timeout -k 5 90 "$py" tests/nixl/nixl_kv_test.py "$@" >>"$part" 2>&1
    r=$?
    if [ $r = 0 ] && grep -q "all checks passed" "$part"; then
        # the transport each transfer took, from the backend's transfer log
        say "pass $name over $tr: $(grep -c '^ok ' "$part") checks; transfers over" \
            "$(grep -o 'bytes over [a-z]*' "$part" | sort | uniq -c | awk '{printf "%s x%s ", $4, $1}')"
    elif [ $r = 77 ]; then
        say "skip $name over $tr: $(grep -m1 '^SKIP' "$part")"
    else
        fail "$name over $tr (exit $r): $(grep -E '^FAIL|Error|rror:' "$part" | head -3 | tr '\n' ' ')"
    fi
    cat "$part" >>"$log"
    rm -f "$part"
}
kv kv-vram-intra intra --vram
kv kv-vram-tcp tcp --vram
kv kv-dram intra
kv kv-dram tcp

# 4. through NIXL vs gpuwire's own API, VRAM
if [ "$ngpu" = 0 ]; then
    say "skip measurement: torch sees no CUDA device"
elif [ -z "$build_pid" ]; then
    say "skip measurement: no cmake to build libgpuwire for gpuwire's own API"
else
    wait "$build_pid"
    b=$?
    if [ $b != 0 ] || [ ! -e "$BUILD/libgpuwire.so" ]; then
        fail "building libgpuwire (build.log: $(grep -m2 -E 'error|Error' "$OUT/build.log" | tr '\n' ' '))"
    else
        for tr in intra tcp; do
            l=$(left)
            if [ "$l" -lt 15 ]; then
                say "skip measurement over $tr: device budget (BUDGET=$BUDGET s) spent"
                continue
            fi
            lim=$l
            [ "$lim" -gt 60 ] && lim=60
            # 9 shapes x 2 paths x 2 rounds x 0.2 s, plus start-up: ~15 s
            GPUWIRE_TRANSPORTS=$tr PYTHONPATH="$root/python:$PYTHONPATH" LD_LIBRARY_PATH="$BUILD" \
                timeout -k 5 "$lim" "$py" bench/compare/nixl_overhead.py --vram --seconds 0.2 --rounds 2 \
                >"$OUT/overhead-vram-$tr.log" 2>&1
            r=$?
            if [ $r = 0 ]; then
                say "measured over $tr (overhead-vram-$tr.log):"
                grep -E '^transport:|^ +desc|^ +[0-9]+ +[0-9]+ \||^latency' "$OUT/overhead-vram-$tr.log" | tee -a "$sum"
            else
                fail "measurement over $tr (exit $r): $(grep -E 'Error|rror:' "$OUT/overhead-vram-$tr.log" | head -2 | tr '\n' ' ')"
            fi
        done
    fi
fi
say "== done in $(($(date +%s) - t0)) s, rc $rc"
exit $rc
