#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# batch_ab_builds.sh BEFORE_BUILD AFTER_BUILD - bench/batch_ab.sh on two
# builds (say main and a branch), alternating ROUNDS times (default 3) so
# that machine load hits both alike, then the median of each row's ratio
# (batched / contiguous) and bandwidth per build.  Every other setting goes
# to batch_ab.sh as it is (TRANSPORTS, REPS, DUR, BIG_DUR, ALLOC_ROWS,
# GET_ROWS); both builds run this tree's batch_ab.sh, so their rows match.
# usage: TRANSPORTS=intra REPS=1 ROUNDS=5 bench/batch_ab_builds.sh /tmp/main-build build > log
set -u
before=${1:?usage: batch_ab_builds.sh BEFORE_BUILD AFTER_BUILD}
after=${2:?usage: batch_ab_builds.sh BEFORE_BUILD AFTER_BUILD}
rounds=${ROUNDS:-3}
here=$(dirname "$0")
raw=$(mktemp)
trap 'rm -f "$raw" "$raw.run"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
  for side in before after; do
    b=$before
    [ "$side" = after ] && b=$after
    echo "## round $i $side ($b), $(date -u '+%H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)"
    # rows: transport shape batch contig ratio ...
    sh "$here/batch_ab.sh" "$b" > "$raw.run"
    cat "$raw.run"
    awk -v s="$side" '$1 !~ /^#/ && $1 != "transport" && NF >= 5 {print s, $1, $2, $3, $4, $5}' "$raw.run" >> "$raw"
  done
  i=$((i + 1))
done
echo "## medians over $rounds rounds (before: $before, after: $after)"
printf '%-12s %-10s %12s %12s %9s %12s %12s %9s\n' transport shape b_batch b_contig b_ratio a_batch a_contig a_ratio
med() { sort -g | awk '{v[NR] = $1} END {if (!NR) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
awk '{print $2, $3}' "$raw" | awk '!seen[$0]++' | while read -r t sh; do
  row=""
  for side in before after; do
    for col in 4 5 6; do
      v=$(awk -v s="$side" -v t="$t" -v h="$sh" -v c="$col" '$1 == s && $2 == t && $3 == h {print $c}' "$raw" | med)
      row="$row $v"
    done
  done
  # shellcheck disable=SC2086
  printf '%-12s %-10s %12s %12s %9s %12s %12s %9s\n' "$t" "$sh" $row
done
