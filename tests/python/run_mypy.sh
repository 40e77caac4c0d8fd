#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_mypy.sh PKG_DIR [PYTHON] - mypy --strict over the Python package, with
# the first of PYTHON, /usr/bin/python3 and python3 on PATH that has mypy.
# Exit 77 (skipped) when none has it, naming the package to install.
set -u
pkg=$1
for py in ${2:-} /usr/bin/python3 $(command -v python3 2>/dev/null); do
  [ -x "$py" ] || continue
  if "$py" -c "import mypy" 2>/dev/null; then
    echo "$("$py" -m mypy --version) ($py): mypy --strict $pkg"
    cd "$(dirname "$pkg")" || exit 1
    exec "$py" -m mypy --strict --cache-dir=/dev/null "$(basename "$pkg")"
  fi
done
echo "SKIP: no Python here has mypy (apt-get install python3-mypy, or scripts/install-deps.sh test)"
exit 77
