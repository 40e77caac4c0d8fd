#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# install-deps.sh [build|test|bench|all] [--check] - makes sure what a step
# needs is here.  It looks for commands, headers and libraries (never for
# package names: CMake from pip, a compiler from conda, a CUDA image's tools
# all count), installs only what is missing, and says what it could not get:
#   required (the step cannot run without it): missing after the attempt ->
#     named with how to install it by hand, exit 1;
#   optional (a feature, a test or a benchmark reference is left out without
#     it): missing after the attempt -> one line saying what is skipped, exit 0.
# Steps (each includes the ones before): build (make, make run), test (make
# test: the Soft-RoCE guest's tools, libFuzzer, pkg-config, etcd, Python
# packages), bench (make bench: iperf3, qperf, perftest, UCX), all.
# Installing needs root and apt-get (Debian/Ubuntu); without them, or where
# the package registry cannot be reached, nothing is installed and the
# report says so.  --check (or GW_DEPS_NO_INSTALL=1): report only.
# Packages whose install failed are not tried again for a day (listed in
# ${XDG_CACHE_HOME:-~/.cache}/gpuwire/install-deps.failed), so that `make` on
# a machine with no registry does not wait for apt every time;
# GW_DEPS_RETRY=1 tries them anyway.
set -u
step=build
install=1
for a in "$@"; do
  case $a in
    build|test|bench|all) step=$a ;;
    --check) install=0 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument '$a' (expected build, test, bench, all or --check)" >&2; exit 2 ;;
  esac
done
[ "${GW_DEPS_NO_INSTALL:-0}" = 1 ] && install=0
# sbin holds depmod, ip, ... for non-root users too
PATH=$PATH:/usr/sbin:/sbin
export PATH
CMAKE_MIN=3.18

# ---- checks: each prints what it found (for the report) and returns 0 if present ----
have() { command -v "$1" 2>/dev/null; }
ver_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
c_cc() { local c; for c in ${CC:-} cc gcc clang; do have "$c" && return 0; done; return 1; }
c_cmake() {
  local p v
  p=$(have cmake) || return 1
  v=$(cmake --version 2>/dev/null | head -1 | awk '{print $3}')
  [ -n "$v" ] && ver_ge "$v" "$CMAKE_MIN" && { echo "$p $v"; return 0; }
  echo "$p $v (older than $CMAKE_MIN)" >&2
  return 1
}
c_cmd() { have "$1"; }
c_hdr() { # a header the C compiler finds
  local c
  for c in ${CC:-} cc gcc clang; do
    have "$c" >/dev/null || continue
    echo "#include <$1>" | "$c" -E -x c - >/dev/null 2>&1 && { echo "<$1>"; return 0; }
    return 1
  done
  return 1
}
c_lib() { ldconfig -p 2>/dev/null | grep -F "$1 " | head -1 | sed 's/.*=> //' | grep . ; }
c_rxe_provider() { ls /usr/lib/*/libibverbs/librxe-rdmav*.so /usr/lib64/libibverbs/librxe-rdmav*.so 2>/dev/null | head -1 | grep . ; }
c_busybox_static() { [ -x /bin/busybox ] && ! LC_ALL=C ldd /bin/busybox >/dev/null 2>&1 && echo /bin/busybox; }
c_libfuzzer() {
  local cl t f
  cl=$(have clang || have clang-14 || have clang-15 || have clang-16) || return 1
  # the runtime libFuzzer links from: a file lookup is enough when present
  for f in libclang_rt.fuzzer-x86_64.a libclang_rt.fuzzer.a libclang_rt.fuzzer-aarch64.a; do
    f=$("$cl" -print-file-name="$f" 2>/dev/null)
    case $f in /*) [ -f "$f" ] && { echo "$cl ($f)"; return 0; } ;; esac
  done
  t=$(mktemp -d) || return 1
  echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}' >"$t/f.c"
  "$cl" -fsanitize=fuzzer,address "$t/f.c" -o "$t/f" >/dev/null 2>&1
  local rc=$?
  rm -rf "$t"
  [ $rc = 0 ] && echo "$cl -fsanitize=fuzzer"
}
c_py() { # a Python module importable by python3 on PATH or by Debian's /usr/bin/python3
  local py
  for py in $(have python3) /usr/bin/python3; do
    # find_spec locates the module without importing it (torch takes seconds)
    [ -x "$py" ] && "$py" -c "import importlib.util as u, sys; sys.exit(u.find_spec('$1') is None)" \
      >/dev/null 2>&1 && { echo "$py"; return 0; }
  done
  return 1
}
c_pyhdr() { # Python.h of a Python >= 3.10 (the Python package's C accelerator, abi3)
  local py inc
  for py in $(have python3) /usr/bin/python3; do
    inc=$("$py" -c "import sys, sysconfig; assert sys.version_info >= (3, 10); print(sysconfig.get_paths()['include'])" 2>/dev/null) &&
      [ -f "$inc/Python.h" ] && { echo "$inc/Python.h"; return 0; }
  done
  return 1
}

# ---- what each step needs ----
# step|req or opt|name|check|Debian packages|what it is for
ITEMS="
build|req|cmake >= $CMAKE_MIN|c_cmake|cmake|configuring the build
build|req|a C11 compiler (cc, gcc or clang)|c_cc|gcc|building the library and the tool
build|req|make|c_cmd make|make|the top-level Makefile and CMake's build files
build|opt|infiniband/verbs.h|c_hdr infiniband/verbs.h|libibverbs-dev|the verbs transport (built without it)
build|opt|rdma/fi_rma.h|c_hdr rdma/fi_rma.h|libfabric-dev|the ofi (libfabric) transport (built without it)
build|opt|openssl/crypto.h|c_hdr openssl/crypto.h|libssl-dev|HMAC authentication, GPUWIRE_AUTH_SECRET (built without it)
build|opt|curl/curl.h|c_hdr curl/curl.h|libcurl4-openssl-dev|the etcd directory of the names layer (built without it; libcurl is loaded at run time)
build|opt|cjson/cJSON.h|c_hdr cjson/cJSON.h|libcjson-dev|the etcd directory of the names layer (built without it; cJSON is loaded at run time)
test|opt|pkg-config|c_cmd pkg-config|pkg-config|the install test (install_smoke)
test|opt|clang with libFuzzer|c_libfuzzer|clang libclang-rt-14-dev|the fuzz test (fuzz_smoke)
test|opt|libibverbs.so.1|c_lib libibverbs.so.1|libibverbs1|verbs tests in the Soft-RoCE guest (verbs_rxe)
test|opt|the rxe verbs provider|c_rxe_provider|ibverbs-providers|verbs tests in the Soft-RoCE guest (verbs_rxe)
test|opt|libfabric.so.1|c_lib libfabric.so.1|libfabric1|the ofi transport's tests over libfabric's tcp and shm providers (ofi_*)
test|opt|qemu-system-x86_64|c_cmd qemu-system-x86_64|qemu-system-x86|the Soft-RoCE guest (verbs_rxe)
test|opt|static busybox|c_busybox_static|busybox-static|the Soft-RoCE guest's initramfs (verbs_rxe)
test|opt|cpio|c_cmd cpio|cpio|the Soft-RoCE guest's initramfs (verbs_rxe)
test|opt|xz|c_cmd xz|xz-utils|the Soft-RoCE guest's kernel (verbs_rxe)
test|opt|modprobe|c_cmd modprobe|kmod|the Soft-RoCE guest's modules (verbs_rxe)
test|opt|rdma (iproute2)|c_cmd rdma|iproute2|the Soft-RoCE guest's rxe links (verbs_rxe)
test|opt|etcd|c_cmd etcd|etcd-server|the names directory tests against a real etcd
test|opt|etcdctl|c_cmd etcdctl|etcd-client|etcd users and roles for the TLS/auth directory test (names_etcd_tls)
test|opt|openssl|c_cmd openssl|openssl|the certificates of the TLS/auth directory test (names_etcd_tls)
test|opt|libcurl.so.4|c_lib libcurl.so.4|libcurl4|the etcd directory at run time (names tests)
test|opt|libcjson.so.1|c_lib libcjson.so.1|libcjson1|the etcd directory at run time (names tests)
test|opt|python3 module pytest|c_py pytest|python3-pytest|the Python package's tests
test|opt|python3 module numpy|c_py numpy|python3-numpy|the Python package's tests (NumPy buffers)
test|opt|python3 module torch|c_py torch|python3-torch|the Python package's tests (PyTorch tensors)
test|opt|python3 module mypy|c_py mypy|python3-mypy|the Python package's type check (python_mypy: mypy --strict)
test|opt|Python.h (>= 3.10)|c_pyhdr|python3-dev|the Python package's C accelerator (ctypes alone without it; bench/compare/python_overhead.sh)
test|opt|python3 module setuptools|c_py setuptools|python3-setuptools|building the Python wheel (python_wheel)
test|opt|python3 module wheel|c_py wheel|python3-wheel|building the Python wheel (python_wheel)
test|opt|python3 module pip|c_py pip|python3-pip|installing the Python wheel (python_wheel)
test|opt|python3 module ensurepip (venv)|c_py ensurepip|python3-venv|the fresh venv the wheel is tested in (python_wheel)
bench|opt|iperf3|c_cmd iperf3|iperf3|the iperf3 reference in bench/compare/tcp_loopback.sh
bench|opt|qperf|c_cmd qperf|qperf|the qperf reference in bench/compare/tcp_loopback.sh
bench|opt|ib_write_bw (perftest)|c_cmd ib_write_bw|perftest|the perftest reference in bench/compare/verbs_row.sh and bench/compare/verbs_rxe.sh
bench|opt|fi_pingpong|c_cmd fi_pingpong|libfabric-bin|the libfabric reference in bench/compare/ofi_loopback.sh
bench|opt|ibv_devinfo|c_cmd ibv_devinfo|ibverbs-utils|RDMA device listing for the verbs benchmarks
bench|opt|ucx_perftest|c_cmd ucx_perftest|ucx-utils|the UCX reference in bench/compare/ucx_tcp.sh
bench|opt|ucp/api/ucp.h|c_hdr ucp/api/ucp.h|libucx-dev|the UCX reference of bench/compare/batch.sh (bench/compare/ucx_batch_bench.c)
"
in_step() { # does an item of step $1 belong to the requested step?
  case $step in
    build) [ "$1" = build ] ;;
    test) [ "$1" = build ] || [ "$1" = test ] ;;
    bench) [ "$1" = build ] || [ "$1" = bench ] ;;
    all) return 0 ;;
  esac
}

# Fills MISSING_REQ / MISSING_OPT with item lines; FOUND with "name: where".
scan() {
  MISSING_REQ=""; MISSING_OPT=""; FOUND=""
  local st need name chk pkgs why where
  while IFS='|' read -r st need name chk pkgs why; do
    [ -n "$st" ] || continue
    in_step "$st" || continue
    if where=$($chk 2>/dev/null); then
      FOUND="$FOUND
  $name: ${where:-yes}"
    elif [ "$need" = req ]; then
      MISSING_REQ="$MISSING_REQ$st|$need|$name|$chk|$pkgs|$why
"
    else
      MISSING_OPT="$MISSING_OPT$st|$need|$name|$chk|$pkgs|$why
"
    fi
  done <<EOF
$ITEMS
EOF
}
pkgs_of() { printf '%s' "$1" | awk -F'|' 'NF > 1 {print $5}' | tr '\n' ' ' | tr -s ' ' | sed 's/^ //; s/ $//'; }

scan
[ -z "$MISSING_REQ$MISSING_OPT" ] && { echo "install-deps: $step: everything is here"; exit 0; }

# ---- install what is missing, where that can be done ----
note=""
stamp=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gpuwire/install-deps.failed
recent_failures() { # packages whose install failed in the last day
  [ "${GW_DEPS_RETRY:-0}" = 1 ] && return 0
  [ -f "$stamp" ] && [ -n "$(find "$stamp" -mmin -1440 2>/dev/null)" ] && cat "$stamp"
}
drop_failed() { # item lines whose packages did not fail recently
  local failed
  failed=$(recent_failures)
  printf '%s' "$1" | while IFS='|' read -r st need name chk pkgs why; do
    [ -n "$st" ] || continue
    skip=0
    for p in $pkgs; do echo "$failed" | grep -qx "$p" && skip=1; done
    [ $skip = 1 ] || printf '%s|%s|%s|%s|%s|%s\n' "$st" "$need" "$name" "$chk" "$pkgs" "$why"
  done
}
if [ $install = 0 ]; then
  note="not installing (--check)"
elif [ "$(id -u)" != 0 ]; then
  note="not root: nothing installed"
elif ! command -v apt-get >/dev/null 2>&1; then
  note="no apt-get here: nothing installed"
else
  export DEBIAN_FRONTEND=noninteractive
  APT_OPTS="-o Acquire::Retries=0 -o Acquire::http::Timeout=15 -o Acquire::https::Timeout=15 -o DPkg::Lock::Timeout=120"
  TRY_REQ=$(drop_failed "$MISSING_REQ")
  TRY_OPT=$(drop_failed "$MISSING_OPT")
  want=$(pkgs_of "$TRY_REQ
$TRY_OPT")
  if [ -z "$want" ]; then
    note="its install failed within the last day: GW_DEPS_RETRY=1 tries again"
  else
  echo "install-deps: $step: missing:$(printf '%s' "$MISSING_REQ$MISSING_OPT" | awk -F'|' 'NF > 1 {printf " %s;", $3}')"
  echo "install-deps: trying apt-get install $want"
  reach=1
  timeout 180 apt-get $APT_OPTS update -qq >/tmp/gw-install-deps.$$ 2>&1 || {
    reach=0; echo "install-deps: apt-get update failed (package registry unreachable?): $(grep -m1 -E 'Err|E:|W:' /tmp/gw-install-deps.$$ | cut -c1-160)"; }
  # required ones first, so that an optional package unknown to this
  # distribution cannot take them down with it; then the optional ones
  # together, and one by one where the batch fails and the registry answers
  for grp in "$TRY_REQ" "$TRY_OPT"; do
    p=$(pkgs_of "$grp")
    [ -n "${p// /}" ] || continue
    if ! timeout 900 apt-get $APT_OPTS install -y -qq --no-install-recommends $p >/tmp/gw-install-deps.$$ 2>&1; then
      echo "install-deps: apt-get install $p failed: $(grep -m1 -E '^E:' /tmp/gw-install-deps.$$ | cut -c1-160)"
      if [ $reach = 1 ]; then
        for one in $p; do
          timeout 600 apt-get $APT_OPTS install -y -qq --no-install-recommends "$one" >/dev/null 2>&1 ||
            echo "install-deps: apt-get install $one failed"
        done
      fi
    fi
  done
  rm -f /tmp/gw-install-deps.$$
  scan
  # remember what still failed, so that the next run does not wait for apt again
  left=$(pkgs_of "$MISSING_REQ$MISSING_OPT")
  if mkdir -p "${stamp%/*}" 2>/dev/null; then
    { recent_failures; for p in $left; do echo "$p"; done; } | sort -u | grep . >"$stamp.new" &&
      mv "$stamp.new" "$stamp" || rm -f "$stamp.new" "$stamp"
  fi
  fi
fi

# ---- the report ----
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo "
while IFS='|' read -r st need name chk pkgs why; do
  [ -n "$st" ] || continue
  echo "install-deps: optional: $name not here, skipped: $why${note:+ ($note)}; to add it: ${sudo}apt-get install $pkgs"
done <<EOF
$MISSING_OPT
EOF
if [ -n "$MISSING_REQ" ]; then
  while IFS='|' read -r st need name chk pkgs why; do
    [ -n "$st" ] || continue
    hint="${sudo}apt-get install $pkgs"
    case $name in cmake*) hint="pip install cmake (or ${sudo}apt-get install cmake)" ;; esac
    echo "install-deps: REQUIRED: $name not found (needed for $why)${note:+ ($note)}; install it by hand: $hint" >&2
  done <<EOF
$MISSING_REQ
EOF
  exit 1
fi
echo "install-deps: $step: every required tool is here${FOUND:+:$(printf '%s' "$FOUND" | grep -E 'cmake|compiler|make:' | tr '\n' ';' | tr -s ' ')}"
exit 0
