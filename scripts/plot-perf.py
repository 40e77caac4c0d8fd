#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws the plots of docs/PERFORMANCE.md from docs/results/perf.csv.

    python3 scripts/plot-perf.py [CSV] [OUTDIR]      # defaults: docs/results/perf.csv docs/img

Needs matplotlib (Debian: apt-get install python3-matplotlib, then run it
with /usr/bin/python3).  perf.csv holds one row per figure: area, series,
op, size_bytes, metric (bw, lat, busbw_ratio), unit, the gpuwire value, the
reference's name and value, machine, date and the log it came from.  Each
plot puts gpuwire beside its reference, and its caption names the machine
and date, so a PNG read alone still says where its figures came from.
NCCL's collectives are drawn by scripts/plot-nccl.py from the benchmark's
own CSV.
"""
import csv
import os
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

GW_COLOR = "#1f5fbf"
REF_COLORS = ["#d9822b", "#6a9f3a", "#8c5aa8"]


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def size_label(n):
    n = int(n)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d %s" % (n >> shift, unit)
    return "%d B" % n


def size_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ticks = sorted(set(sizes))
    if len(ticks) > 8:  # every other size keeps the labels apart
        ticks = ticks[::2]
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(s) for s in ticks], rotation=45, ha="right")
    ax.set_xlabel("message size")
    ax.grid(True, which="major", alpha=0.3)


def caption(fig, rows):
    machines = sorted({r["machine"] for r in rows})
    dates = sorted({r["date"] for r in rows})
    fig.text(0.01, 0.01, "%s; %s; docs/results/perf.csv" % ("; ".join(machines), ", ".join(dates)),
             fontsize=7, color="#555555")


def series_plot(rows, area, title, out, metrics=("bw", "lat")):
    """One panel per metric: gpuwire (one line) and each reference (one line each)."""
    sel = [r for r in rows if r["area"] == area]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4.2))
    if len(metrics) == 1:
        axes = [axes]
    for ax, metric in zip(axes, metrics):
        mrows = [r for r in sel if r["metric"] == metric]
        if not mrows:
            continue
        unit = mrows[0]["unit"]
        gw = OrderedDict()
        refs = OrderedDict()
        for r in mrows:
            s = int(r["size_bytes"])
            gw[s] = float(r["gpuwire"])
            refs.setdefault(r["reference_name"], OrderedDict())[s] = float(r["reference"])
        name = mrows[0]["series"]
        xs = sorted(gw)
        ax.plot(xs, [gw[x] for x in xs], "o-", color=GW_COLOR, lw=2.5, zorder=3, label="gpuwire: " + name)
        for i, (rn, vals) in enumerate(refs.items()):
            rx = sorted(vals)
            ax.plot(rx, [vals[x] for x in rx], "s--", color=REF_COLORS[i % len(REF_COLORS)], lw=1.5,
                    ms=5, zorder=2, label=rn)
        size_axis(ax, xs)
        if metric == "bw":
            # linear: the large sizes, where the ratios matter, stay apart
            ax.set_ylabel("bandwidth [%s] (higher is better)" % unit)
            ax.set_ylim(bottom=0)
        else:
            ax.set_yscale("log")
            ax.set_ylabel("latency [%s] (lower is better)" % unit)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=11)
    caption(fig, sel)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def verbs_plot(rows, out):
    """Bandwidth of put/get/send against perftest's, one panel per operation."""
    sel = [r for r in rows if r["area"] == "verbs-rxe" and r["metric"] == "bw"]
    ops = [o for o in ("put", "get", "send") if any(r["op"] == o for r in sel)]
    fig, axes = plt.subplots(1, len(ops), figsize=(4.4 * len(ops), 4.0), sharey=True)
    for ax, op in zip(axes, ops):
        orows = sorted((r for r in sel if r["op"] == op), key=lambda r: int(r["size_bytes"]))
        xs = [int(r["size_bytes"]) for r in orows]
        ax.plot(xs, [float(r["gpuwire"]) for r in orows], "o-", color=GW_COLOR, lw=2, label="gpuwire " + op)
        ax.plot(xs, [float(r["reference"]) for r in orows], "s--", color=REF_COLORS[0], lw=1.5,
                label=orows[0]["reference_name"])
        size_axis(ax, xs)
        ax.set_yscale("log")
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("bandwidth [Gb/s] (higher is better)")
    fig.suptitle("verbs on Soft-RoCE (emulated NIC: compares code paths, not hardware)", fontsize=11)
    caption(fig, sel)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "docs/results/perf.csv"
    outdir = sys.argv[2] if len(sys.argv) > 2 else "docs/img"
    os.makedirs(outdir, exist_ok=True)
    rows = load(src)
    made = []
    jobs = [
        ("gpu-intra.png", lambda p: series_plot(rows, "gpu-intra",
                                                "GPU0 -> GPU1 between two processes: gpuwire intra (CUDA IPC) put", p)),
        ("tcp-gpu.png", lambda p: series_plot(rows, "tcp-gpu",
                                              "GPU0 -> GPU1 over tcp loopback, staged through host memory", p)),
        ("verbs-rxe.png", lambda p: verbs_plot(rows, p)),
        ("tcp-sweep.png", lambda p: series_plot(rows, "tcp-sweep",
                                               "Host memory over tcp loopback: gpuwire put against qperf", p)),
    ]
    for name, job in jobs:
        path = os.path.join(outdir, name)
        job(path)
        made.append(path)
    for p in made:
        print(p)


if __name__ == "__main__":
    main()
