#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_fuzz.sh SRC BUILD CLANG SECONDS TARGET... - builds the libFuzzer targets
# with clang + ASan/UBSan in BUILD (a separate CMake tree) and runs each for
# SECONDS each (GW_FUZZ_SECONDS in the environment overrides it).  The
# corpus stays in BUILD/corpus, so short runs add up.  Exit 77 (skipped)
# when clang cannot link libFuzzer here.
set -u
src=$1 bld=$2 cc=$3 secs=${GW_FUZZ_SECONDS:-$4}
shift 4
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' > "$tmp/t.c"
if ! "$cc" -fsanitize=fuzzer,address "$tmp/t.c" -o "$tmp/t" 2>"$tmp/err"; then
  echo "SKIP: $cc cannot link libFuzzer (apt-get install libclang-rt-14-dev):"; cat "$tmp/err"
  exit 77
fi
cmake -S "$src" -B "$bld" -DCMAKE_C_COMPILER="$cc" -DGW_FUZZ=ON -DGW_ASAN=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$tmp/cfg" 2>&1 || { cat "$tmp/cfg"; exit 1; }
cmake --build "$bld" -j 2 --target "$@" >"$tmp/build" 2>&1 || { tail -50 "$tmp/build"; exit 1; }
rc=0
for t in "$@"; do
  corpus="$bld/corpus/$t"
  mkdir -p "$corpus"
  echo "== $t: ${secs}s"
  # -timeout: one input taking over 5 s is a hang; -rss_limit_mb bounds memory
  if ! "$bld/tests/fuzz/$t" -max_total_time="$secs" -timeout=5 -rss_limit_mb=1024 \
        -print_final_stats=1 -artifact_prefix="$bld/" "$corpus" >"$tmp/$t.log" 2>&1; then
    echo "$t FAILED:"; tail -60 "$tmp/$t.log"; rc=1
  else
    grep -E 'stat::number_of_executed_runs|stat::new_units_added|cov:' "$tmp/$t.log" | tail -3
  fi
done
exit $rc
