# SPDX-License-Identifier: Apache-2.0
"""NIXL's Python API module (nixl._api), from whichever wheel is installed.

The `nixl` meta package imports nixl_cu12 or nixl_cu13 by the CUDA major
version of the installed torch, and refuses when that one is missing (torch
built for CUDA 13 next to nixl-cu12 alone, or nixl-cu12 installed without the
meta package).  Neither wheel's Python API or core libraries link CUDA, and
the GPUWIRE backend links nothing of NIXL, so either serves: this takes the
meta package's choice when it works, else nixl_cu13, else nixl_cu12.

    python nixl_api.py    # prints the module it found and its file, or why none (exit 1)
"""
import importlib


def load():
    """Returns NIXL's _api module; raises ImportError naming every failure."""
    errors = []
    for name in ("nixl._api", "nixl_cu13._api", "nixl_cu12._api"):
        try:
            return importlib.import_module(name)
        except ImportError as e:
            errors.append("%s: %s" % (name, e))
    raise ImportError("no NIXL Python API (pip install nixl-cu12 or nixl-cu13): " + "; ".join(errors))


if __name__ == "__main__":
    import sys

    try:
        m = load()
        print("%s (%s)" % (m.__name__, m.__file__))
    except ImportError as e:
        print(e)
        sys.exit(1)
