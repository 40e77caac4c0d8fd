#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws the KV-shape ratios recorded by bench/compare/kv_shapes.py --json:
per shape, gpuwire's paged transfer over one contiguous put of the same bytes
and over one put per descriptor, one bar per transport (and memory kind).

    /usr/bin/python3 scripts/plot-kv.py JSONL OUT.png [TITLE]

A line at 1 marks parity.  Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    title = sys.argv[3] if len(sys.argv) > 3 else ""
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    runs = list(dict.fromkeys("%s%s" % (r["transport"], ", GPU" if r.get("gpu") else "") for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for ax, key, what in ((axes[0], "paged_over_contiguous", "paged / one contiguous put"),
                          (axes[1], "paged_over_per_desc", "paged / one put per descriptor")):
        w = 0.8 / max(1, len(runs))
        for k, run in enumerate(runs):
            xs, ys = [], []
            for i, sh in enumerate(shapes):
                for r in rows:
                    if r["shape"] == sh and "%s%s" % (r["transport"], ", GPU" if r.get("gpu") else "") == run:
                        xs.append(i + (k - (len(runs) - 1) / 2) * w)
                        ys.append(r[key])
            ax.bar(xs, ys, width=w, label=run)
        ax.axhline(1.0, color="#666666", linewidth=1, linestyle="--")
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(shapes, rotation=20)
        ax.set_ylabel("ratio")
        ax.set_title(what)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
