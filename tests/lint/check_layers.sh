#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# check_layers.sh SRC_ROOT - the design rules that a grep can check
# (docs/DESIGN.md, "Layers"):
#  1. a layer includes nothing above it: every `#include "<dir>/..."` in
#     src/<layer>/ names a directory of the same rank or lower;
#  2. a transport includes only transport/base of the transport layer, never
#     another transport's directory;
#  3. the settings registry (src/core/settings.c) is the only reader of the
#     environment: no getenv/secure_getenv anywhere else in src/, tools/ or
#     plugin/;
#  4. the names layer (src/names) is above the api and reached from below
#     only through the context extension (api/api.h): no file outside
#     src/names names a gw_names_* function or the names state.
# Prints every breach with file:line and exits 1 if any.
set -u
R=${1:?usage: check_layers.sh SRC_ROOT}
cd "$R" || exit 2
TMPF=$(mktemp) || exit 2
trap 'rm -f "$TMPF"' EXIT
# 1 and 2, in one awk pass over every source file
find src -name '*.c' -o -name '*.h' -o -name '*.cu' | sort | xargs awk '
BEGIN { split("core cuda bootstrap mem topo transport proto api names diag", L, " ")
        for (i in L) rank[L[i]] = i + 0 }
FNR == 1 { split(FILENAME, p, "/"); layer = p[2]; sub_ = p[3] }
/^[ \t]*#[ \t]*include[ \t]*"[a-z_]+\// {
  inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
  split(inc, q, "/"); dir = q[1]
  if (!(layer in rank) || !(dir in rank)) next
  if (rank[dir] > rank[layer])
    printf "LAYER %s:%d: %s includes %s (%s is above %s)\n", FILENAME, FNR, layer, inc, dir, layer
  else if (layer == "transport" && dir == "transport" && sub_ != "base" && q[2] != "base" && q[2] != sub_)
    printf "LAYER %s:%d: transport/%s includes %s (another transport)\n", FILENAME, FNR, sub_, inc
}' | tee -a "$TMPF"
# 3: getenv only in the registry
grep -rn -E '\b(secure_)?getenv[[:space:]]*\(' src tools plugin --include='*.c' --include='*.h' |
  grep -v '^src/core/settings\.c:' | while IFS= read -r line; do
    echo "GETENV $line (read settings through src/core/settings.h)"
    echo x >> "$TMPF"
  done
# 4: nothing below the names layer calls into it
grep -rn -E '\bgw_names_[a-z_]+[[:space:]]*\(|struct gw_names\b' src --include='*.c' --include='*.h' |
  grep -v '^src/names/' | while IFS= read -r line; do
    echo "NAMES $line (the api reaches the names layer only through its context extension, api/api.h)"
    echo x >> "$TMPF"
  done
n=$(wc -l < "$TMPF")
if [ "$n" -gt 0 ]; then echo "check_layers: $n breach(es)"; exit 1; fi
echo "check_layers: layers, transport isolation, settings discipline and the names extension boundary hold"
