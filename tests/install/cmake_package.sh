#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cmake_package.sh BUILD_DIR CONSUMER_SRC - installs into a temporary prefix
# (cmake --install), then configures, builds and runs the consumer project
# against it twice: through find_package(gpuwire CONFIG) (shared and static
# targets) and through pkg-config.  The installed tool and the consumer run
# with no LD_LIBRARY_PATH: their RPATH finds the library.
set -u
b=$1 src=$2
fail=0
err() { echo "FAIL: $*"; fail=1; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
unset LD_LIBRARY_PATH
cmake --install "$b" --prefix "$d/prefix" >"$d/install.log" 2>&1 || { cat "$d/install.log"; exit 1; }
for f in lib/cmake/gpuwire/gpuwireConfig.cmake lib/cmake/gpuwire/gpuwireConfigVersion.cmake \
         lib/cmake/gpuwire/gpuwireTargets.cmake lib/pkgconfig/gpuwire.pc include/gpuwire.h; do
  [ -f "$d/prefix/$f" ] || err "not installed: $f"
done
"$d/prefix/bin/gpuwire" --version || err "the installed tool does not run without LD_LIBRARY_PATH"
if command -v readelf >/dev/null; then
  readelf -d "$d/prefix/bin/gpuwire" | grep -q 'R.*PATH.*\$ORIGIN/\.\./lib' ||
    err "the installed tool has no \$ORIGIN/../lib RPATH: $(readelf -d "$d/prefix/bin/gpuwire" | grep PATH)"
fi
build() { # NAME CMAKE_ARGS...
  n=$1; shift
  if ! cmake -S "$src" -B "$d/$n" "$@" >"$d/$n.log" 2>&1 || ! cmake --build "$d/$n" >>"$d/$n.log" 2>&1; then
    err "consumer ($n) did not build:"; tail -30 "$d/$n.log"; return 1
  fi
  grep 'gpuwire .* from ' "$d/$n.log"
}
if build config -DCMAKE_PREFIX_PATH="$d/prefix"; then
  "$d/config/consumer" || err "consumer (find_package, shared) failed"
  "$d/config/consumer_static" || err "consumer (find_package, static) failed"
fi
if command -v pkg-config >/dev/null; then
  if PKG_CONFIG_PATH="$d/prefix/lib/pkgconfig" build pc -DUSE_PKGCONFIG=ON; then
    "$d/pc/consumer" || err "consumer (pkg-config) failed"
  fi
else
  echo "pkg-config not installed: the pkg-config consumer is not built"
fi
# the Python package that make install puts under the prefix loads the
# installed library and accelerator (when Python's headers were there to build it)
pydir=$(cd "$d/prefix" && ls -d lib/python3*/*-packages 2>/dev/null | head -1)
if [ -n "$pydir" ] && [ -x /usr/bin/python3 ]; then
  (cd "$d" && PYTHONPATH="$d/prefix/$pydir" /usr/bin/python3 -c '
import os, sys, gpuwire
from gpuwire import _lib
gpuwire.load_library()
ok, why = gpuwire.accelerated()
want = os.path.realpath(sys.argv[1])
print("installed Python package: library %s, accelerator %s" % (_lib.path, "in use" if ok else why))
assert os.path.realpath(_lib.path).startswith(want), _lib.path
assert ok or not os.path.exists(os.path.join(os.path.dirname(gpuwire.__file__), "_gwfast.abi3.so")), why
' "$d/prefix" 2>&1) || err "the installed Python package does not load the installed library"
else
  echo "no Python package under the prefix: its check is skipped"
fi
[ $fail = 0 ] && echo "cmake_package: all checks passed"
exit $fail
