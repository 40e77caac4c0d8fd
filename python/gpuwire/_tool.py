# SPDX-License-Identifier: Apache-2.0
"""The `gpuwire` command of the wheel: runs the tool binary that comes with
the package (gpuwire/bin/gpuwire) with the same arguments."""
import os
import sys


def main() -> int:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gpuwire")
    if not os.access(exe, os.X_OK):
        print("gpuwire: the tool is not in this copy of the package (%s); install the wheel "
              "(pip install .) or build it (make build)" % exe, file=sys.stderr)
        return 127
    os.execv(exe, [exe] + sys.argv[1:])
    return 127  # (execv does not return)


if __name__ == "__main__":
    sys.exit(main())
