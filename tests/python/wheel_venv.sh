#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# wheel_venv.sh SRC - the Python package as a user installs it: builds the
# wheel from a copy of the checkout (pip wheel --no-build-isolation, no
# package index), installs it into a fresh venv (--system-site-packages:
# pytest and numpy come from the system), then, from a directory outside the
# checkout and with no PYTHONPATH or LD_LIBRARY_PATH, checks that the package
# (every module and py.typed), its library and the accelerator are the
# installed ones, that the `gpuwire`
# console script and the NCCL plugin path work, and runs the Python suite
# against it.  Exit 77 (skipped) when Debian's Python lacks what the build or
# the suite needs, naming the packages.
set -u
src=$1
py=/usr/bin/python3
[ -x $py ] || py=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }
miss=""
$py -c "import setuptools, wheel" 2>/dev/null || miss="$miss python3-setuptools python3-wheel"
$py -m pip --version >/dev/null 2>&1 || miss="$miss python3-pip"
$py -c "import ensurepip, venv" 2>/dev/null || miss="$miss python3-venv"
$py -c "import sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()['include'] + '/Python.h'))" ||
  miss="$miss python3-dev"
$py -c "import pytest" 2>/dev/null || miss="$miss python3-pytest"
if [ -n "$miss" ]; then
  echo "SKIP: $py lacks what the wheel test needs: apt-get install$miss"
  exit 77
fi
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
unset PYTHONPATH LD_LIBRARY_PATH
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
mkdir "$t/src"
(cd "$src" && tar --exclude=./.git --exclude='./build*' -cf - .) | tar -xf - -C "$t/src" || exit 1
echo "== pip wheel --no-build-isolation (from a copy of the checkout)"
$py -m pip wheel -q --no-build-isolation --no-deps -w "$t/dist" "$t/src" >"$t/wheel.log" 2>&1 ||
  { tail -40 "$t/wheel.log"; echo "FAIL: pip wheel"; exit 1; }
ls "$t/dist"
$py -m venv --system-site-packages "$t/venv" || { echo "FAIL: venv"; exit 1; }
"$t/venv/bin/pip" install -q --no-deps "$t"/dist/gpuwire-*.whl || { echo "FAIL: pip install of the wheel"; exit 1; }
mkdir "$t/run"
cp -r "$src/python/tests" "$src/python/examples" "$t/run/"
cd "$t/run" || exit 1
fail=0
"$t/venv/bin/python" - "$t/venv" <<'PY' || fail=1
import os, subprocess, sys, warnings
venv = os.path.realpath(sys.argv[1])
warnings.simplefilter("error")          # a missing accelerator warns: fail on it
import gpuwire
from gpuwire import _lib
bad = []
def inside(p):
    return os.path.realpath(p).startswith(venv + os.sep)
if not inside(gpuwire.__file__): bad.append("gpuwire imported from %s" % gpuwire.__file__)
ok, why = gpuwire.accelerated()
if not ok: bad.append("accelerator not in use: %s" % why)
if not inside(_lib.path): bad.append("libgpuwire loaded from %s" % _lib.path)
if ok and not inside(_lib.fast.__file__): bad.append("accelerator from %s" % _lib.fast.__file__)
pkg = os.path.dirname(gpuwire.__file__)
if not os.path.exists(os.path.join(pkg, "py.typed")): bad.append("no py.typed in %s (PEP 561)" % pkg)
for m in ("context", "memory", "endpoint", "batch", "names", "request", "core"):
    if not os.path.exists(os.path.join(pkg, m + ".py")): bad.append("module gpuwire.%s not installed" % m)
plugin = gpuwire.nccl_plugin_path()
if not inside(plugin) or not os.path.exists(plugin): bad.append("plugin path %s" % plugin)
out = subprocess.run([sys.executable, "-m", "gpuwire.nccl_plugin"], capture_output=True, text=True)
if out.stdout.strip() != plugin: bad.append("python -m gpuwire.nccl_plugin: %r %r" % (out.stdout, out.stderr))
tool = os.path.join(venv, "bin", "gpuwire")
out = subprocess.run([tool, "--version"], capture_output=True, text=True)
if out.returncode or gpuwire.version() not in out.stdout: bad.append("gpuwire --version: %r" % (out,))
with gpuwire.Context() as c:
    names = [n for n, usable, _ in c.transports() if usable]
    if "tcp" not in names: bad.append("transports %r" % names)
print("installed: %s; library %s; accelerator in use; plugin %s" % (gpuwire.__file__, _lib.path, plugin))
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
echo "== the Python suite against the installed package"
"$t/venv/bin/python" -m pytest -q -p no:cacheprovider tests || fail=1
[ $fail = 0 ] && echo "wheel_venv: all checks passed"
exit $fail
