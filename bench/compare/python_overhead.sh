#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# python_overhead.sh - per-operation overhead of the Python binding over the C
# call, in one run: bench/compare/py_overhead.c times untracked and tracked 8-byte puts
# and gw_request_test in C, bench/compare/python_overhead.py times the same through
# `import gpuwire`, plus the bare ctypes call and a minimal C extension doing
# the same gw_put (the measurement behind choosing ctypes).  Goal: <= 2 us.
#
# usage: bench/compare/python_overhead.sh [BUILD_DIR]    (default: build)
# env:   TRANSPORT=intra|tcp (default intra: the cheapest C call, so the largest
#        relative overhead), N=200000 operations, PYTHON=/usr/bin/python3
set -eu
bld=$(cd "${1:-build}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tl=${TRANSPORT:-intra}
n=${N:-200000}
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/py_overhead" "$root/bench/compare/py_overhead.c" -I"$root/include" -L"$bld" -lgpuwire \
   -lpthread -Wl,-rpath,"$bld"
extdir=
if inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])') &&
   [ -f "$inc/Python.h" ]; then
  suf=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  cc -O2 -shared -fPIC -o "$tmp/_gw_overhead_ext$suf" "$root/bench/compare/py_overhead_ext.c" \
     -I"$inc" -I"$root/include" -L"$bld" -lgpuwire -Wl,-rpath,"$bld" && extdir=$tmp
else
  echo "(no Python.h for $py: the C-extension row is left out; apt-get install python3-dev)"
fi
echo "== $(date -u), $(uname -n), $(nproc) CPUs, $("$py" -V 2>&1), transport $tl, $n ops"
"$tmp/py_overhead" target "$tl" >"$tmp/addr" &
tpid=$!
trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
while [ ! -s "$tmp/addr" ]; do sleep 0.1; done
addr=$(head -1 "$tmp/addr")
"$tmp/py_overhead" "$addr" "$tl" "$n" >"$tmp/c.txt"
PYTHONPATH="$root/python" LD_LIBRARY_PATH="$bld" "$py" "$root/bench/compare/python_overhead.py" \
  "$addr" "$tl" "$n" "$tmp/c.txt" $extdir
