#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# python_pages.sh - a 4096-entry paged put (gw_xfer_pages, counted
# notification, tracked) posted from Python against the same post from C, in
# one run: ROUNDS rounds of BURST posts back to back (each timed alone),
# then waited for.  Two C references: a C loop inside the Python process
# (bench/compare/py_overhead_ext.c pages_loop, on the same buffers, index arrays and
# endpoint, alternating with the Python rounds: the two differ by the binding
# alone), and a separate C program (bench/compare/py_pages.c, before and after).
# bench/compare/python_pages.py prints each Python figure against both; the goal
# (target: within 1.2x of C) is judged against the in-process C loop.
#
# usage: bench/compare/python_pages.sh [BUILD_DIR]    (default: build)
# env:   TRANSPORT=intra|tcp (default intra), PAGES=4096, PAGE=4096 bytes,
#        ROUNDS=200, BURST=1 (posts back to back per round), PYTHON=/usr/bin/python3
set -eu
bld=$(cd "${1:-build}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tl=${TRANSPORT:-intra}
pages=${PAGES:-4096}
page=${PAGE:-4096}
rounds=${ROUNDS:-200}
burst=${BURST:-1}
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/py_pages" "$root/bench/compare/py_pages.c" -I"$root/include" -L"$bld" -lgpuwire \
   -Wl,-rpath,"$bld"
inc=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "python_pages.sh: no Python.h for $py (apt-get install python3-dev): the in-process C reference cannot be built" >&2
  exit 1
fi
suf=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
cc -O2 -shared -fPIC -o "$tmp/_gw_overhead_ext$suf" "$root/bench/compare/py_overhead_ext.c" \
   -I"$inc" -I"$root/include" -L"$bld" -lgpuwire -Wl,-rpath,"$bld"
echo "== $(date -u), $(uname -n), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)," \
     "$("$py" -V 2>&1), transport $tl, $pages pages of $page B, $rounds bursts of $burst posts"
"$tmp/py_pages" target "$tl" $((pages * page)) >"$tmp/addr" &
tpid=$!
trap 'kill $tpid 2>/dev/null; rm -rf "$tmp"' EXIT
while [ ! -s "$tmp/addr" ]; do sleep 0.1; done
addr=$(head -1 "$tmp/addr")
"$tmp/py_pages" "$addr" "$tl" "$pages" "$page" "$rounds" "$burst" >"$tmp/c1.txt"
PYTHONPATH="$root/python" LD_LIBRARY_PATH="$bld" "$py" "$root/bench/compare/python_pages.py" \
  "$addr" "$tl" "$pages" "$page" "$rounds" "$burst" "$tmp" "$tmp/c1.txt"
"$tmp/py_pages" "$addr" "$tl" "$pages" "$page" "$rounds" "$burst" >"$tmp/c2.txt"
echo "separate C program, before / after (post ns best, median):" \
     "$(grep -h '^post ' "$tmp/c1.txt" | cut -d' ' -f2) $(grep -h '^post_med' "$tmp/c1.txt" | cut -d' ' -f2) /" \
     "$(grep -h '^post ' "$tmp/c2.txt" | cut -d' ' -f2) $(grep -h '^post_med' "$tmp/c2.txt" | cut -d' ' -f2)"
