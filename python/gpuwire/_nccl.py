# SPDX-License-Identifier: Apache-2.0
"""The NCCL net plugin that comes with this package (libnccl-net-gpuwire.so).

    export NCCL_NET_PLUGIN=$(python -m gpuwire.nccl_plugin)

or from Python, before NCCL initialises:

    os.environ["NCCL_NET_PLUGIN"] = gpuwire.nccl_plugin_path()

The file is self-contained (gpuwire is inside it); docs/NCCL.md describes it.
"""
import importlib
import os

_NAME = "libnccl-net-gpuwire.so"


def nccl_plugin_path() -> str:
    """Full path of the bundled NCCL net plugin; FileNotFoundError when this
    copy of the package has none (a source tree without a build)."""
    here = os.path.dirname(os.path.abspath(__file__))
    cands = [os.path.join(here, _NAME)]
    try:
        # make install: the installed library directory
        LIBDIR = importlib.import_module("._where", __package__).LIBDIR
        cands.append(os.path.normpath(os.path.join(here, LIBDIR, _NAME)))
    except ImportError:
        pass
    from . import _lib
    if _lib.path and os.sep in _lib.path:  # beside the loaded library (a build tree)
        cands.append(os.path.join(os.path.dirname(os.path.abspath(_lib.path)), "plugin", "nccl", _NAME))
    for c in cands:
        if os.path.exists(c):
            return c
    raise FileNotFoundError("gpuwire: no %s beside the package (looked in: %s); install the wheel "
                            "(pip install .) or build plugin/nccl" % (_NAME, ", ".join(cands)))
