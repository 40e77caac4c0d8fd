#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Draws gpuwire beside each peer library, shape by shape, from a peers.csv
written by bench/peers/peers_bench.py.

    /usr/bin/python3 scripts/plot-peers.py CSV OUT.png [TITLE]

One column per shape. Top row: the rate, operations per second for the
small shapes (lat8, b1_4k, b256_1k: transfers or batches per second) and
GB/s for the 64 MiB ones; bottom row: the median latency of one transfer
(us, or ms where it reaches 10 ms).
Each pair measured (peer and the gpuwire transport set against it) is a
group of two bars, gpuwire's figure from that pair's own run and the
peer's, with gpuwire/peer written above (rates: above 1 means gpuwire is
ahead; latency: below 1 does; grey within 3%). A panel whose values span more than 20x is
drawn on a log scale. The caption gives the machine, date and load from the
CSV. Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHAPES = [  # name, title, unit of the rate row
    ("lat8", "one 8-byte put", "ops/s"),
    ("b1_4k", "1 x 4 KiB (batch of 1)", "ops/s"),
    ("b256_1k", "256 x 1 KiB batch", "ops/s"),
    ("b4096_16k", "4,096 x 16 KiB batch", "GB/s"),
    ("one_64m", "one 64 MiB put", "GB/s"),
]
PEER_NAMES = {"mooncake": "Mooncake", "nixl": "NIXL", "uccl": "UCCL"}
GW_COLOR = "#1f5fbf"
PEER_COLOR = "#d9822b"


def pair_label(peer, peer_tl, gw_tl):
    name = PEER_NAMES.get(peer, peer)
    tl = peer_tl
    if tl.startswith("ucx[") and tl.endswith("]"):
        tl = "UCX " + tl[4:-1]
    tl = textwrap.fill(tl.replace(",", ", "), 18)
    return "%s\n%s\nvs gpuwire %s" % (name, tl, gw_tl)


def fmt_ratio(r):
    if r < 0.1:
        return "%.2gx" % r
    return "%.2fx" % r if r < 10 else "%.0fx" % r


def panel(ax, pairs, values, unit, lower_better):
    xs = range(len(pairs))
    w = 0.38
    gw = [v[0] for v in values]
    pe = [v[1] for v in values]
    ax.bar([x - w / 2 for x in xs], gw, w, color=GW_COLOR, label="gpuwire")
    ax.bar([x + w / 2 for x in xs], pe, w, color=PEER_COLOR, label="peer")
    vals = [v for v in gw + pe if v > 0]
    if vals and max(vals) / min(vals) > 20:
        ax.set_yscale("log")
        top = max(vals) * 6
        ax.set_ylim(min(vals) / 3, top)
    else:
        ax.set_ylim(0, max(vals) * 1.25 if vals else 1)
    for x, g, p in zip(xs, gw, pe):
        if g > 0 and p > 0:
            r = g / p
            ahead = r < 1 if lower_better else r > 1
            color = "#666666" if 0.97 <= r <= 1.03 else "#1a7f37" if ahead else "#b42318"
            y = max(g, p) * (1.6 if ax.get_yscale() == "log" else 1.04)
            ax.text(x, y, fmt_ratio(r), ha="center", va="bottom", fontsize=8,
                    color=color, fontweight="bold")
    ax.set_xlim(-0.7, len(pairs) - 0.3)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(pairs, fontsize=7)
    ax.set_ylabel(unit)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_axisbelow(True)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = list(csv.DictReader(open(sys.argv[1], newline="")))
    title = sys.argv[3] if len(sys.argv) > 3 else "gpuwire beside the peer libraries"
    pairs = []  # (peer, peer_transport, gpuwire_transport), in CSV order
    val = {}
    for r in rows:
        if r["peer"] == "gpuwire" or not r["peer_value"]:
            continue
        key = (r["peer"], r["peer_transport"], r["gpuwire_transport"])
        if key not in pairs:
            pairs.append(key)
        val[(r["shape"], key, r["unit"])] = (float(r["gpuwire_value"]), float(r["peer_value"]))
    if not pairs:
        print("plot-peers: no measured peer rows in %s" % sys.argv[1], file=sys.stderr)
        return 1
    shapes = [s for s in SHAPES if any((s[0], k, s[2]) in val for k in pairs)]
    width = max(3.0, 1.1 + 0.75 * len(pairs)) * len(shapes) + 0.6
    fig, axes = plt.subplots(2, len(shapes), figsize=(width, 8.4), squeeze=False)
    for col, (shape, stitle, unit) in enumerate(shapes):
        keys = [k for k in pairs if (shape, k, unit) in val]
        labels = [pair_label(*k) for k in keys]
        panel(axes[0][col], labels, [val[(shape, k, unit)] for k in keys], unit, False)
        axes[0][col].set_title("%s\n(%s)" % (stitle, shape), fontsize=10)
        lat = [k for k in keys if (shape, k, "us_p50") in val]
        us = [val[(shape, k, "us_p50")] for k in lat]
        if us and max(max(v) for v in us) >= 10000:  # milliseconds read better
            panel(axes[1][col], [pair_label(*k) for k in lat], [(g / 1e3, p / 1e3) for g, p in us],
                  "p50 latency, ms", True)
        else:
            panel(axes[1][col], [pair_label(*k) for k in lat], us, "p50 latency, us", True)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper left", ncol=2, fontsize=9, frameon=False)
    r0 = rows[0]
    loads = [float(x) for r in rows for x in r["load"].split("/") if x]
    caption = ("%s, %s UTC (peers_bench.py, median of rounds; load %s). "
               "Rates: higher is better; latency: lower.\n"
               "Label above a pair: gpuwire / peer, green where gpuwire is ahead, "
               "red where it is behind, grey within 3%%." % (
                   r0["machine"], r0["date"].replace("T", " ").rstrip("Z"),
                   "%.1f-%.1f" % (min(loads), max(loads)) if loads else "?"))
    fig.suptitle(title, fontsize=13)
    fig.text(0.5, 0.01, caption, ha="center", fontsize=9, wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    fig.savefig(sys.argv[2], dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main())
