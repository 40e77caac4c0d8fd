#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""peers_md.py PEERS.CSV - the CSV of peers_bench.py as one Markdown table per
shape: each measured peer's row with gpuwire's value, the peer's and the
ratio, per unit; '(behind)' marks a row where gpuwire is behind."""
import csv
import sys

ORDER = ["lat8", "b1_4k", "b256_1k", "b4096_16k", "one_64m"]
TITLE = {"lat8": "one 8-byte put", "b1_4k": "one 4 KiB descriptor (batch of 1)",
         "b256_1k": "256 x 1 KiB descriptors", "b4096_16k": "4,096 x 16 KiB descriptors",
         "one_64m": "one 64 MiB put"}


def fmt(v, unit):
    if v == "":
        return ""
    x = float(v)
    if unit == "GB/s":
        return "%.4g" % x
    if unit == "ops/s":
        return "%.0f" % x if x >= 100 else "%.3g" % x
    return "%.1f" % x


def main():
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["peer"] != "gpuwire"]
    for shape in ORDER:
        sel = [r for r in rows if r["shape"] == shape]
        if not sel:
            continue
        print("### %s (`%s`)\n" % (TITLE[shape], shape))
        print("| peer (its transport) | gpuwire | unit | gpuwire | peer | gpuwire/peer | load gw/peer |")
        print("| --- | --- | --- | ---: | ---: | ---: | --- |")
        for r in sel:
            ratio = r["ratio"]
            if ratio:
                behind = float(ratio) > 1 if r["unit"] == "us_p50" else float(ratio) < 1
                ratio = "%.3gx%s" % (float(ratio), " (behind)" if behind else "")
            print("| %s (%s) | %s | %s | %s | %s | %s | %s |" % (
                r["peer"], r["peer_transport"], r["gpuwire_transport"], r["unit"],
                fmt(r["gpuwire_value"], r["unit"]), fmt(r["peer_value"], r["unit"]), ratio,
                r["load"]))
        print()


if __name__ == "__main__":
    main()
