# SPDX-License-Identifier: Apache-2.0
"""python -m gpuwire.nccl_plugin: prints the full path of the NCCL net plugin
that comes with this package, for NCCL_NET_PLUGIN:

    export NCCL_NET_PLUGIN=$(python -m gpuwire.nccl_plugin)
"""
import sys

from ._nccl import nccl_plugin_path


def main() -> int:
    try:
        print(nccl_plugin_path())
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
