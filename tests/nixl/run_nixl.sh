#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# run_nixl.sh PYTHON PLUGIN SCRIPT [ARGS...]
# Runs SCRIPT with a Python that can import NIXL's Python API (nixl._api,
# nixl_cu13._api or nixl_cu12._api, from the nixl wheels: nixl_api.py),
# NIXL_PLUGIN_DIR pointing at a fresh folder that
# holds only PLUGIN (so GPUWIRE is the only backend NIXL finds).  PYTHON
# empty: $GW_NIXL_PYTHON, then python3 on PATH.  Exits 77 (skipped) with the
# reason when no such Python is found.
py=$1
plugin=$2
shift 2
[ -n "$py" ] || py=${GW_NIXL_PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
    echo "SKIP: no Python '$py' (configure with -DGW_NIXL_PYTHON=<python with the nixl wheel>)"
    exit 77
fi
if ! why=$("$py" "$(dirname "$0")/nixl_api.py" 2>&1); then
    echo "SKIP: $py cannot import NIXL's Python API (pip install nixl; or -DGW_NIXL_PYTHON=<venv python>): $(printf '%s' "$why" | tail -n 1)"
    exit 77
fi
if [ ! -f "$plugin" ]; then
    echo "FAIL: plugin $plugin not built"
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/gw-nixl-plugins.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT INT TERM
cp "$plugin" "$dir/" || exit 1
NIXL_PLUGIN_DIR=$dir "$py" "$@"
