#!/bin/sh
# Installs the Debian packages gpuwire's build, tests and benchmarks need.
# As root it installs what is missing; otherwise it names what is missing
# and carries on (the build adapts: features whose headers are absent are
# left out and `gpuwire info` says so).
set -u
PKGS="cmake make gcc clang pkg-config libssl-dev libibverbs-dev ibverbs-providers ibverbs-utils \
rdma-core perftest iperf3 qperf ucx-utils libucx-dev qemu-system-x86 busybox-static cpio xz-utils kmod iproute2 \
libclang-rt-14-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "install-deps: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || apt-get update
  apt-get install -y -qq --no-install-recommends $missing >/dev/null || {
    echo "install-deps: apt-get install failed for:$missing" >&2; exit 1; }
else
  echo "install-deps: not root; missing Debian packages:$missing" >&2
  echo "install-deps: run: sudo apt-get install$missing" >&2
fi
exit 0
