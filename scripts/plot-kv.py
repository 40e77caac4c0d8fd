#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws the KV-shape ratios recorded by bench/compare/kv_shapes.py --json:
per shape, gpuwire's paged transfer over one contiguous put of the same bytes
and over one put per descriptor, one bar per transport (and memory kind).

    /usr/bin/python3 scripts/plot-kv.py [--gpu] JSONL OUT.png [TITLE]

--gpu draws the GPU rows' panels instead: paged (and the prepared plan,
where the row has one) over one contiguous put with its notification, and
paged over the NCCL route (gather, send/recv, scatter).

A line at 1 marks parity.  Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    args = sys.argv[1:]
    gpu = "--gpu" in args
    args = [a for a in args if a != "--gpu"]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in open(args[0]) if line.strip()]
    title = args[2] if len(args) > 2 else ""
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    if gpu:   # bars: (label, key) per panel
        panels = (("paged and plan / one contiguous put with its notification",
                   (("paged", "paged_over_contig_notify"), ("plan", "plan_over_contig_notify"))),
                  ("paged / the NCCL route", (("paged", "paged_over_nccl"),)))
    else:
        runs = list(dict.fromkeys("%s%s" % (r["transport"], ", GPU" if r.get("gpu") else "") for r in rows))
        panels = (("paged / one contiguous put", tuple((run, "paged_over_contiguous") for run in runs)),
                  ("paged / one put per descriptor", tuple((run, "paged_over_per_desc") for run in runs)))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for ax, (what, bars) in zip(axes, panels):
        w = 0.8 / max(1, len(bars))
        for k, (label, key) in enumerate(bars):
            xs, ys = [], []
            for i, sh in enumerate(shapes):
                for r in rows:
                    run = "%s%s" % (r["transport"], ", GPU" if r.get("gpu") else "")
                    if r["shape"] == sh and key in r and (gpu or run == label):
                        xs.append(i + (k - (len(bars) - 1) / 2) * w)
                        ys.append(r[key])
            if xs:
                ax.bar(xs, ys, width=w, label=label)
        ax.axhline(1.0, color="#666666", linewidth=1, linestyle="--")
        if gpu and ax is axes[0]:   # the copy's own ceiling on the H200s: 0.90-0.93x of the copy engine
            ax.axhline(0.9, color="#aa3333", linewidth=1, linestyle=":")
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels(shapes, rotation=20)
        ax.set_ylabel("ratio")
        ax.set_title(what)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(args[1], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
