#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Regenerates docs/SETTINGS.md from src/core/settings.def (the one registry)."""
import os
import re

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = open(os.path.join(root, "src/core/settings.def")).read()
items = re.findall(r'X\((\w+),\s*"(GPUWIRE_\w+)",\s*(\w+),\s*"([^"]*)",\s*"([^"]*)",\s*"([^"]*)",'
                   r'\s*"([^"]*)",\s*"((?:[^"\\]|\\.)*)"\)', src)


def words_text(words):
    ws = ["empty" if w == "" else w for w in words.split("|")] if words else []
    if len(ws) <= 1:
        return "".join(ws)
    return ", ".join(ws[:-1]) + " or " + ws[-1]


def accepts(kind, lo, hi, words):
    """The same text as gw_setting_desc_t.accepts (src/core/settings.c)."""
    w = words_text(words)
    tail = ", or " + w if w else ""
    if kind == "INT":
        return f"integer {lo}..{hi}{tail}"
    if kind == "SIZE":
        return (f"size {lo}..{hi} (K/M/G/T)" if hi else f"size >= {lo} (K/M/G/T)") + tail
    if kind == "WORDS":
        return "one of " + w
    return "text"

out = ["# Settings", "",
       "Every setting is an environment variable read at `gw_context_create()`. `gpuwire info --settings` prints each "
       "with the value in force and whether it came from the environment. An unknown `GPUWIRE_*` variable gets a "
       "warning naming the closest known one. The registry is `src/core/settings.def`, which also gives each "
       "setting's kind and range (the \"accepts\" column): `gw_context_create()` refuses a value outside it with "
       "GW_ERR_CONFIG, whichever transports are allowed. A unit test checks that "
       "this page lists every entry (regenerate it with `scripts/gen-settings-doc.py`).", "",
       "| name | default | accepts | meaning |", "| --- | --- | --- | --- |"]
for _id, name, kind, lo, hi, words, default, text in items:
    d = f"`{default}`" if default else "(unset)"
    out.append(f"| `{name}` | {d} | {accepts(kind, lo, hi, words)} | {text} |")
open(os.path.join(root, "docs/SETTINGS.md"), "w").write("\n".join(out) + "\n")
print(f"docs/SETTINGS.md: {len(items)} settings")
