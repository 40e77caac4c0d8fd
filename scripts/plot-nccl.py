#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws NCCL bus bandwidth against size, the gpuwire plugin beside NCCL's
socket transport, from a coll.csv written by bench/nccl_coll.sh.

    /usr/bin/python3 scripts/plot-nccl.py CSV OUT.png [TITLE]

One panel per collective; one line per configuration present in the CSV
(socket, gw = plugin with its default transports, gw-host = plugin with
NCCL's buffers in host memory, gw-tcp-host = plugin over tcp, default =
NCCL's own NVLink path, drawn for scale).  Needs matplotlib (Debian:
python3-matplotlib).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "socket": ("NCCL socket", "#d9822b", "-"),
    "gw": ("gpuwire plugin (GPU buffers, intra)", "#1f5fbf", "-"),
    "gw-host": ("gpuwire plugin (host buffers, intra)", "#1f5fbf", ":"),
    "gw-tcp-host": ("gpuwire plugin over tcp (host buffers)", "#6a9f3a", "-"),
    "gw-tcp": ("gpuwire plugin over tcp (GPU buffers)", "#6a9f3a", ":"),
    "default": ("NCCL default (NVLink), for scale", "#999999", "--"),
}


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = list(csv.DictReader(open(sys.argv[1], newline="")))
    title = sys.argv[3] if len(sys.argv) > 3 else ""
    data = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["label"] not in STYLE:
            continue
        data[r["coll"]][r["label"]].append((int(r["bytes"]), float(r["busbw_GBps"])))
    colls = sorted(data)
    ncols = 3
    nrows = (len(colls) + 1 + ncols - 1) // ncols  # one cell left for the legend
    fig, axes = plt.subplots(nrows, ncols, figsize=(13, 4.0 * nrows), squeeze=False)
    cells = [ax for row in axes for ax in row]
    for ax, coll in zip(cells, colls):
        for label, (name, color, ls) in STYLE.items():
            pts = sorted(data[coll].get(label, []))
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, color=color, marker=".", label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(coll)
        ax.set_xlabel("bytes")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_ylabel("bus bandwidth, GB/s")
    handles, labels = cells[0].get_legend_handles_labels()
    for ax in cells[len(colls):]:
        ax.axis("off")
    cells[len(colls)].legend(handles, labels, loc="center", fontsize=10)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(sys.argv[2], dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main())
