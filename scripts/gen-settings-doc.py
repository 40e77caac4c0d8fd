#!/usr/bin/env python3
"""Regenerates docs/SETTINGS.md from src/core/settings.def (the one registry)."""
import os
import re

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = open(os.path.join(root, "src/core/settings.def")).read()
items = re.findall(r'X\((\w+),\s*"(GPUWIRE_\w+)",\s*"([^"]*)",\s*"((?:[^"\\]|\\.)*)"\)', src)
out = ["# Settings", "",
       "Every setting is an environment variable read at `gw_context_create()`. `gpuwire info` prints each "
       "with the value in force and whether it came from the environment. An unknown `GPUWIRE_*` variable gets a "
       "warning naming the closest known one. The registry is `src/core/settings.def`; a unit test checks that "
       "this page lists every entry (regenerate it with `scripts/gen-settings-doc.py`).", "",
       "| name | default | meaning |", "| --- | --- | --- |"]
for _id, name, default, text in items:
    out.append(f"| `{name}` | `{default}` | {text} |" if default else f"| `{name}` | (unset) | {text} |")
open(os.path.join(root, "docs/SETTINGS.md"), "w").write("\n".join(out) + "\n")
print(f"docs/SETTINGS.md: {len(items)} settings")
