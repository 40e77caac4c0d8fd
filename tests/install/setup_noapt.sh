#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# setup_noapt.sh SRC BUILD [FAKECUDA_LIB] - the set-up where the package
# manager cannot help: apt-get, dpkg and dpkg-query on PATH
# refuse everything, as on a GPU server with no registry in reach.
#  1. the tools being here is enough: install-deps exits 0 for every step;
#     an optional thing that is absent (iperf3, qperf hidden from PATH) gets
#     a one-line "skipped" note, whatever apt says;
#  2. a required tool that is absent (cmake hidden) or too old (a stand-in
#     cmake 3.10) fails the step, named with how to install it by hand;
#  3. a cmake that no package manager knows (a pip-style wrapper) counts;
#  4. `make run` goes through (against the existing build tree), and with a
#     CUDA driver (the fake one, when given) it measures GPU memory first;
#     without one it says so and measures host memory.
set -u
src=$1 bld=$2 fake=${3:-}
t=$(mktemp -d) || exit 1
export XDG_CACHE_HOME="$t/cache" # no failure memory from earlier runs
trap 'rm -rf "$t"' EXIT
fail=0
no() { echo "FAIL: $*"; fail=1; }
mkdir -p "$t/refuse" "$t/old" "$t/pip"
for c in apt-get apt dpkg dpkg-query sudo; do
  printf '#!/bin/sh\necho "E: %s refused (setup_noapt test)" >&2\nexit 100\n' "$c" >"$t/refuse/$c"
  chmod +x "$t/refuse/$c"
done
# PATH copies without some commands: symlinks to everything else on PATH
sandbox() { # DIR NAME... : DIR/bin holds every command on PATH but NAME...
  d=$1; shift
  mkdir -p "$d/bin"
  old_ifs=$IFS; IFS=:
  for p in $PATH; do # first on PATH wins, as for the shell
    case $p in /*) [ -d "$p" ] && cp -sn "$p"/* "$d/bin/" 2>/dev/null ;; esac
  done
  IFS=$old_ifs
  for x in "$@"; do rm -f "$d/bin/$x"; done
}
cd "$src" || exit 1

echo "== 1. tools here, apt refuses"
for step in build test bench; do
  out=$(PATH="$t/refuse:$PATH" scripts/install-deps.sh $step 2>&1); rc=$?
  echo "$out" | sed "s/^/  [$step] /"
  [ $rc = 0 ] || no "install-deps $step exited $rc with every required tool present"
  echo "$out" | grep -q "REQUIRED" && no "install-deps $step named a required tool as missing"
done
sandbox "$t/s1" iperf3 qperf
# a cache of its own: on a machine without the bench tools the loop above
# already tried apt for them, and that failure is remembered for a day
export XDG_CACHE_HOME="$t/cache-s1"
out=$(PATH="$t/refuse:$t/s1/bin" scripts/install-deps.sh bench 2>&1); rc=$?
echo "$out" | sed "s/^/  [bench, no iperf3] /"
[ $rc = 0 ] || no "install-deps bench exited $rc for a missing optional iperf3"
echo "$out" | grep -q "optional: iperf3 not here, skipped" || no "no one-line note for the missing iperf3"
echo "$out" | grep -q "optional: qperf not here, skipped" || no "no one-line note for the missing qperf"
if [ "$(id -u)" = 0 ]; then
  echo "$out" | grep -q "apt-get .*failed" || no "as root, the refused apt-get was not reported"
fi

# what failed is not tried again for a day: make does not wait for apt each time
out=$(PATH="$t/refuse:$t/s1/bin" scripts/install-deps.sh bench 2>&1); rc=$?
echo "$out" | sed "s/^/  [bench again] /"
[ $rc = 0 ] || no "install-deps bench exited $rc the second time"
echo "$out" | grep -q "trying apt-get" && no "the packages that failed a moment ago were tried again"
echo "$out" | grep -q "optional: iperf3 not here, skipped" || no "the second run did not note the missing iperf3"

echo "== 2. a required tool missing or too old"
sandbox "$t/s2" cmake
out=$(PATH="$t/refuse:$t/s2/bin" scripts/install-deps.sh build 2>&1); rc=$?
echo "$out" | sed "s/^/  [no cmake] /"
[ $rc = 1 ] || no "install-deps build exited $rc without cmake (expected 1)"
echo "$out" | grep -q "REQUIRED: cmake >= 3.18 not found (needed for configuring the build).*install it by hand: pip install cmake" ||
  no "the missing cmake was not named with how to install it"
printf '#!/bin/sh\necho "cmake version 3.10.2"\n' >"$t/old/cmake"; chmod +x "$t/old/cmake"
out=$(PATH="$t/refuse:$t/old:$t/s2/bin" scripts/install-deps.sh build 2>&1); rc=$?
echo "$out" | sed "s/^/  [cmake 3.10] /"
[ $rc = 1 ] || no "install-deps build exited $rc with cmake 3.10 (expected 1)"

echo "== 3. a cmake from pip"
real=$(command -v cmake)
printf '#!/bin/sh\n# what pip install cmake puts on PATH: a wrapper\nexec "%s" "$@"\n' "$real" >"$t/pip/cmake"
chmod +x "$t/pip/cmake"
out=$(PATH="$t/refuse:$t/pip:$t/s2/bin" scripts/install-deps.sh build 2>&1); rc=$?
echo "$out" | sed "s/^/  [pip cmake] /"
[ $rc = 0 ] || no "install-deps build exited $rc with a pip-style cmake"

echo "== 4. make run"
if [ -n "$fake" ]; then
  out=$(PATH="$t/refuse:$PATH" GPUWIRE_CUDA_LIB="$fake" PERF_SIZES=8,4K PERF_DURATION=0.05 \
        make --no-print-directory run BUILD="$bld" 2>&1); rc=$?
  echo "$out" | grep -E "^(install-deps|==|#|[0-9])" | grep -v "^#  " | sed "s/^/  [make run, GPU] /"
  [ $rc = 0 ] || no "make run exited $rc"
  echo "$out" | grep -q "== GPU memory (GPU 0 on both sides)" || no "make run did not measure GPU memory"
  echo "$out" | grep -q "# initiator buffer: CUDA device memory" || no "the GPU sweep did not use device memory"
  echo "$out" | grep -q "# note: both processes use GPU" || no "perf did not say both processes share one GPU"
  echo "$out" | grep -q "== host memory" || no "make run did not measure host memory"
fi
out=$(GPUWIRE_CUDA_LIB=/nonexistent/libcuda.so.1 PERF_SIZES=8 PERF_DURATION=0.05 scripts/run-main.sh "$bld" 2>&1); rc=$?
echo "$out" | grep -E "^(==|[0-9])" | sed "s/^/  [run, no GPU] /"
[ $rc = 0 ] || no "run-main.sh exited $rc without a GPU"
echo "$out" | grep -q "== no usable GPU here" || no "without a GPU, the main job did not say so"
[ $fail = 0 ] && echo "setup_noapt: all checks passed"
exit $fail
