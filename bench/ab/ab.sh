#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# ab.sh SIDE SIDE... - A/B: the same measurements on two or more builds,
# source trees or settings of gpuwire, the sides alternating inside every
# round so that a change of machine load hits all of them alike; then, per
# row, each side's median (or best) and its ratio to the first side.  For
# changes that must not cost speed, and for choosing a setting's default.
#
# A SIDE is [NAME=]DIR[@VAR=value,VAR=value...]:
#   DIR   a build folder (holds the `gpuwire` tool) or a source tree (holds
#         CMakeLists.txt: built into $WORK/b-NAME with the gpuwire_tool target,
#         once per tree however many sides name it)
#   NAME  the column's name (default: A, B, C ... by position)
#   @...  GPUWIRE_* settings (or any variables) this side runs with
#
# What is measured, one of:
#   ROWS=FILE   rows of `gpuwire perf --loopback --json` runs (default:
#               bench/ab/rows/tl.rows); each line is
#                 name|transport|json key|perf options[|reference row]
#               (`#` starts a comment); the perf run gets --loopback --json
#               --duration DUR besides.  A reference row (a contiguous put
#               for a batch, say) adds a column per side: this row's value
#               over the reference row's, from the same side and round.
#   EACH=CMD    a command run once per side and round with the side's build
#               folder as its last argument (e.g. EACH="sh bench/compare/batch.sh"):
#               every line of its output that is not a comment is a row: its
#               leading words name it, its numbers are its columns.
# Knobs: REPS rounds (default 3), DUR seconds per perf run (default 2),
#   STAT=median|best (default median; best is the highest value, or the
#   lowest for keys named lat_*), BUDGET seconds after which the remaining
#   rows are skipped and said to be (default none: a device call has a time
#   limit), OUT a folder for the logs (every perf JSON line, every EACH
#   output, the round-by-round table; default a temporary one, removed),
#   WORK where source trees are built (default /tmp/gw-ab), JOBS for those
#   builds (default half the CPUs), BUILD_TARGETS more targets to build in
#   each tree (e.g. fakecuda_batch_gpu).
#
# Examples (bench/README.md, "A/B" lists them all):
#   bench/ab/ab.sh /tmp/main-build build                    # tcp and intra rows
#   ROWS=bench/ab/rows/gpu_batch.rows STAT=best bench/ab/ab.sh before=/tmp/main after=.
#   ROWS=bench/ab/rows/tcp_gpu_batch.rows bench/ab/ab.sh d=build s=build@GPUWIRE_TCP_BATCH_GPU=scratch
#   EACH="sh bench/compare/batch.sh" TRANSPORTS=intra REPS=5 bench/ab/ab.sh /tmp/main-build build
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { sed -n '3,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; exit 2; }
reps=${REPS:-3}
dur=${DUR:-2}
stat=${STAT:-median}
rows_file=${ROWS:-$here/rows/tl.rows}
each=${EACH:-}
work=${WORK:-/tmp/gw-ab}
jobs=${JOBS:-$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))}
case $stat in median|best) ;; *) echo "ab.sh: STAT must be median or best, not '$stat'" >&2; exit 2;; esac
if [ -z "$each" ] && [ ! -r "$rows_file" ]; then echo "ab.sh: ROWS=$rows_file: no such file" >&2; exit 2; fi
if [ -n "${OUT:-}" ]; then log=$OUT; mkdir -p "$log" || exit 1; else
  log=$(mktemp -d) || exit 1; trap 'rm -rf "$log"' EXIT; fi
: > "$log/raw.txt"      # side row round column value

# ---- sides: names, build folders, settings
names=() builds=() envs=()
letters=(A B C D E F G H I J K L)
i=0
for s in "$@"; do
  name=${letters[$i]}
  case $s in *=*) case ${s%%=*} in */*|.*) ;; *) name=${s%%=*}; s=${s#*=};; esac;; esac
  dir=${s%%@*} env=""
  [ "$dir" != "$s" ] && env=${s#*@}
  [ -d "$dir" ] || { echo "ab.sh: side $name: $dir is not a folder" >&2; exit 2; }
  dir=$(cd "$dir" && pwd)
  if [ ! -x "$dir/gpuwire" ]; then
    [ -f "$dir/CMakeLists.txt" ] || { echo "ab.sh: side $name: $dir is neither a build folder (no gpuwire) nor a source tree" >&2; exit 2; }
    b=$work/b-$(echo "$dir" | md5sum | cut -c1-8)
    if [ ! -f "$b/.ab-built" ]; then
      mkdir -p "$b"
      echo "# building $dir in $b" >&2
      if ! { cmake -S "$dir" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
             cmake --build "$b" -j "$jobs" --target gpuwire_tool ${BUILD_TARGETS:-}; } >"$b/build.log" 2>&1; then
        echo "ab.sh: side $name: building $dir failed; the end of $b/build.log:" >&2; tail -20 "$b/build.log" >&2; exit 1
      fi
      touch "$b/.ab-built"
    fi
    dir=$b
  fi
  names+=("$name") builds+=("$dir") envs+=("$env")
  i=$((i + 1))
done
n=${#names[@]}

# runs "$@" with side k's settings
with_env() {
  local k=$1; shift
  local e=${envs[$k]} kv=()
  [ -n "$e" ] && IFS=, read -r -a kv <<< "$e"
  env "${kv[@]}" "$@"
}

echo "# ab: $(for k in $(seq 0 $((n - 1))); do printf '%s=%s%s ' "${names[$k]}" "${builds[$k]}" "${envs[$k]:+@${envs[$k]}}"; done)"
echo "# date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC'); load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "# machine: $(uname -srm), $(nproc) CPUs$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | sed 's/^/, /')"
if [ -n "$each" ]; then echo "# $reps alternating rounds, ${stat}s; EACH=$each (row#N: the row's Nth number)"
else echo "# $reps alternating rounds, ${stat}s of ${dur}s perf runs; rows: $rows_file"; fi

if [ -z "$each" ]; then
  # ---- perf rows
  rows=$(sed 's/#.*//' "$rows_file" | awk -F'|' 'NF >= 4')
  echo "$rows" | while IFS='|' read -r row tl key args ref; do
    if [ -n "${BUDGET:-}" ] && [ "$SECONDS" -gt "$BUDGET" ]; then
      echo "# $row: skipped (past BUDGET=${BUDGET}s)"; continue; fi
    for r in $(seq "$reps"); do
      for k in $(seq 0 $((n - 1))); do
        # shellcheck disable=SC2086
        j=$(with_env "$k" GPUWIRE_TRANSPORTS="$tl" timeout $((dur * 20 + 60)) "${builds[$k]}/gpuwire" perf --loopback \
              --duration "$dur" --json $args 2>>"$log/perf.err" | tail -1)
        echo "${names[$k]} $row $j" >> "$log/perf.jsonl"
        v=$(echo "$j" | sed -n "s/.*\"$key\":\([-0-9.e+]*\).*/\1/p")
        echo "${names[$k]} $row $r 1 ${v:--}" >> "$log/raw.txt"
        echo "# round $r ${names[$k]} $row $key=${v:--}" >> "$log/rounds.txt"
      done
    done
  done
else
  # ---- a command per side and round
  for r in $(seq "$reps"); do
    for k in $(seq 0 $((n - 1))); do
      echo "## round $r ${names[$k]}, $(date -u '+%H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$log/each.txt"
      # shellcheck disable=SC2086
      with_env "$k" $each "${builds[$k]}" > "$log/each.run" 2>>"$log/each.err"
      cat "$log/each.run" >> "$log/each.txt"
      [ -s "$log/each.header" ] ||   # the first line without numbers names the columns
        awk '$1 !~ /^#/ && NF >= 2 { for (i = 1; i <= NF; i++) if ($i ~ /^-?[0-9.]+$/) next; print; exit }' \
          "$log/each.run" > "$log/each.header"
      # a row: leading words name it, the numbers after are its columns
      awk -v s="${names[$k]}" -v r="$r" '$1 !~ /^#/ && NF {
          key = ""; c = 0
          for (i = 1; i <= NF; i++) {
            if ($i ~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ && key != "") { c++; print s, key, r, c, $i }
            else if (c == 0) key = key (key == "" ? "" : "/") $i
          }
        }' "$log/each.run" >> "$log/raw.txt"
    done
  done
fi

# ---- the table: per row, each side's statistic, its ratio to the first
# side, and (rows with a reference) its ratio to the reference row
sides="${names[*]}"
refs=""
lows=""
if [ -z "$each" ]; then
  refs=$(sed 's/#.*//' "$rows_file" | awk -F'|' 'NF >= 5 && $5 != "" {print $1, $5}')
  lows=$(sed 's/#.*//' "$rows_file" | awk -F'|' 'NF >= 4 && $3 ~ /^lat/ {printf " %s ", $1}')
fi
awk -v sides="$sides" -v stat="$stat" -v refs="$refs" -v lows="$lows" -v each="$each" '
  { k = $2 SUBSEP $4; if (!(k in seen)) { seen[k] = 1; order[++nr] = k }
    if ($5 != "-") { m = ++cnt[$1, k]; val[$1, k, m] = $5 } }
  function pick(s, k, low,   m, i, j, t, a) {
    m = cnt[s, k]; if (!m) return "-"
    for (i = 1; i <= m; i++) a[i] = val[s, k, i] + 0
    for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    if (stat == "best") return low ? a[1] : a[m]
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  function ratio(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.3f", a / b) }
  END {
    ns = split(sides, S, " "); nref = split(refs, R, "\n")
    for (i = 1; i <= nref; i++) { split(R[i], p, " "); ref[p[1]] = p[2] }
    printf "%-30s", "row"
    for (i = 1; i <= ns; i++) printf " %12s", S[i]
    for (i = 2; i <= ns; i++) printf " %9s", S[i] "/" S[1]
    if (refs != "") for (i = 1; i <= ns; i++) printf " %10s", S[i] "/ref"
    printf "\n"
    for (o = 1; o <= nr; o++) {
      split(order[o], kk, SUBSEP); row = kk[1]; col = kk[2]
      low = index(lows, " " row " ") > 0
      printf "%-30s", (each == "" ? row : row "#" col)
      for (i = 1; i <= ns; i++) { v[i] = pick(S[i], order[o], low); printf " %12s", v[i] }
      for (i = 2; i <= ns; i++) printf " %9s", ratio(v[i], v[1])
      if (refs != "") for (i = 1; i <= ns; i++)
        printf " %10s", (row in ref) ? ratio(v[i], pick(S[i], ref[row] SUBSEP col, 0)) : "-"
      printf "\n"
    }
  }' "$log/raw.txt" | tee "$log/table.txt"
[ -s "$log/each.header" ] && echo "# the command's columns: $(cat "$log/each.header")"
[ -s "$log/perf.err" ] && grep -qiE "error|fail" "$log/perf.err" && { echo "# perf stderr (the end):"; grep -iE "error|fail" "$log/perf.err" | tail -5; }
[ -s "$log/each.err" ] && { echo "# EACH stderr (the end):"; tail -5 "$log/each.err"; }
exit 0
