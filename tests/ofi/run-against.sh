#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs the ofi test suite (ctest label ofi: every *_ofi_tcp, *_ofi_shm and
# other ofi test) against a libfabric other than the system's, e.g. a
# libfabric 2.x built from source or the one an EFA installer put in
# /opt/amazon/efa.  The build is unchanged (it compiles against the
# libfabric-dev headers); the transport loads the library named here at run
# time (GPUWIRE_OFI_LIB), with its directory first on LD_LIBRARY_PATH so the
# libraries it loads in turn come from beside it.
#
# usage: tests/ofi/run-against.sh LIB [CTEST_ARGS...]
#   LIB          the library (.../libfabric.so.1) or a prefix holding
#                lib/libfabric.so.1 (or lib64/)
#   CTEST_ARGS   passed to ctest after "-L ofi --output-on-failure"
#                (default -j2; e.g. -R it_safety to narrow)
#   BUILD        the build directory (default: build, beside tests/)
# Exit status: ctest's; 2 when LIB is not a loadable libfabric.
set -eu
if [ $# -lt 1 ]; then
  sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
lib=$1
shift
if [ -d "$lib" ]; then
  for d in lib lib64; do
    if [ -e "$lib/$d/libfabric.so.1" ]; then lib=$lib/$d/libfabric.so.1; break; fi
  done
fi
if [ ! -e "$lib" ]; then
  echo "run-against.sh: no libfabric.so.1 at $lib" >&2
  exit 2
fi
lib=$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$here/build}
[ -d "$build" ] || { echo "run-against.sh: no build directory $build (set BUILD)" >&2; exit 2; }
export GPUWIRE_OFI_LIB="$lib"
export LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# which libfabric the transport loads, as it reports it: a library that does
# not load (or is too old) says why here rather than as 80 skipped tests
tool=$build/gpuwire
if [ -x "$tool" ]; then
  line=$(GPUWIRE_TRANSPORTS=ofi GPUWIRE_OFI_PROVIDER=tcp "$tool" info 2>&1 | grep -m1 '^ *ofi ' || true)
  echo "run-against.sh: $lib: ${line:-no ofi line from gpuwire info}"
  case "$line" in
    *"not usable"*) echo "run-against.sh: the ofi transport is not usable with $lib" >&2; exit 2 ;;
    *usable*) ;;
    *) echo "run-against.sh: the ofi transport is not usable with $lib" >&2; exit 2 ;;
  esac
fi
cd "$build"
[ $# -gt 0 ] || set -- -j2
exec ctest -L ofi --output-on-failure "$@"
