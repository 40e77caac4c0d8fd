#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that every relative link in the repository's Markdown files
resolves to a file or folder of the working tree.

    python3 scripts/check-doc-links.py [ROOT]        # exit 1 when one does not

Links inside fenced code blocks, URLs (scheme:) and in-page anchors (#...)
are skipped; a link's own #anchor is ignored.
"""
import os
import re
import subprocess
import sys


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = subprocess.check_output(["git", "ls-files", "*.md"], cwd=root, text=True).split()
    bad = 0
    for f in files:
        with open(os.path.join(root, f)) as fh:
            text = re.sub(r"```.*?```", "", fh.read(), flags=re.S)
        for m in re.finditer(r"\]\(([^)\s]+)\)", text):
            target = m.group(1)
            if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(root, os.path.dirname(f), target.split("#")[0]))
            if not os.path.exists(path):
                print("%s: broken link %s" % (f, target))
                bad += 1
    print("%d broken link(s) in %d files" % (bad, len(files)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
