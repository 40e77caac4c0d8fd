#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_pytest.sh BUILD_DIR py=[PYTHON] PYTEST_ARGS... - runs pytest over the
# gpuwire package with libgpuwire from BUILD_DIR.  Exit 77 (ctest: skipped)
# when no Python with pytest is found, or when every test case skipped; the
# reasons are printed.
b=$1; want=${2#py=}; shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
pick=""
for py in $want /usr/bin/python3 python3; do
  command -v "$py" >/dev/null 2>&1 || continue
  # find_spec locates a module without importing it (importing torch takes
  # seconds, and each Python test would pay it once more here)
  if "$py" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('pytest', 'numpy', 'torch')))" \
      >/dev/null 2>&1; then pick=$py; break; fi
  [ -z "$pick" ] && "$py" -c "import importlib.util as u, sys; sys.exit(u.find_spec('pytest') is None)" >/dev/null 2>&1 &&
    pick=$py
done
if [ -z "$pick" ]; then
  echo "SKIP: no Python with pytest found (tried: $want /usr/bin/python3 python3); apt-get install python3-pytest python3-numpy python3-torch"
  exit 77
fi
export PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$b${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
echo "python: $pick ($("$pick" -c 'import sys; print(sys.version.split()[0])'))"
exec "$pick" - "$@" <<'PY'
import sys
import pytest

class Count:
    passed = failed = 0
    skipped = []

    def pytest_runtest_logreport(self, report):
        if report.passed and report.when == "call":
            Count.passed += 1
        elif report.failed:
            Count.failed += 1
        elif report.skipped:
            Count.skipped.append(str(report.longrepr[-1]) if isinstance(report.longrepr, tuple)
                                 else str(report.longrepr))

    def pytest_collectreport(self, report):
        if report.skipped:
            Count.skipped.append(str(report.longrepr[-1]) if isinstance(report.longrepr, tuple)
                                 else str(report.longrepr))

rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider"] + sys.argv[1:], plugins=[Count()])
if rc in (0, 5) and Count.passed == 0 and Count.failed == 0:
    print("SKIP: every case skipped: " + "; ".join(sorted(set(Count.skipped))) if Count.skipped
          else "SKIP: no test collected")
    sys.exit(77)
sys.exit(int(rc))
PY
