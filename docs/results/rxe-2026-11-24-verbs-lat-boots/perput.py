#!/usr/bin/env python3
"""perput.py DIR NAME - per put and side from cg.sh's callgrind files.

For each side (the bench's parent and forked child, matched by pid order
between the N=1000 and N=3000 runs), (Ir(3000) - Ir(1000)) / ROUNDS per
function, self and inclusive.  ROUNDS = 2200: the loop makes N + N/10 + 1
rounds (its warm-up), so the runs differ by 2200 (the earlier callgrind
notes, rxe-2026-11-24-verbs-lat-direct/ and -lat-no-request/, divided by
2000: their figures are 1.1x these).  Prints the api entry points'
inclusive sums (gw_put + gw_request_wait + gw_request_free = what a side
does per put outside its watch) and the self costs above 2 per put."""
import glob, os, re, subprocess, sys

d, name = sys.argv[1], sys.argv[2]
ROUNDS = float(os.environ.get("ROUNDS", "2200"))

def files(n):
    fs = [f for f in glob.glob(f"{d}/{name}.{n}.*") if re.search(r"\.\d+$", f)]
    fs = [f for f in fs if "timeout" not in open(f, errors="replace").read(4000)]
    return sorted(fs, key=lambda f: int(f.rsplit(".", 1)[1]))

def costs(f, incl):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--tree=none", "--auto=no", "--inclusive=" + ("yes" if incl else "no"), f],
                         capture_output=True, text=True).stdout
    c = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)\s+\[(.*)\]$", line)
        if m:
            fn = m.group(2)
            if fn.startswith("???"):
                fn += " " + os.path.basename(m.group(3))
            fn = re.sub(r"^.*/(src|bench|tests)/", r"\1/", fn)
            c[fn] = c.get(fn, 0) + int(m.group(1).replace(",", ""))
    return c

a, b = files(1000), files(3000)
for side, (f1, f3) in enumerate(zip(a, b)):
    print(f"== {name} side {side} ({os.path.basename(f1)} / {os.path.basename(f3)})")
    for incl in (True, False):
        c1, c3 = costs(f1, incl), costs(f3, incl)
        rows = sorted(((c3.get(k, 0) - c1.get(k, 0)) / ROUNDS, k) for k in set(c1) | set(c3))
        rows = [r for r in rows if r[0] >= 2][::-1]
        if incl:
            api = {k.split(":")[-1]: v for v, k in rows}
            tot = sum(api.get(k, 0) for k in ("gw_put", "gw_request_wait", "gw_request_free"))
            print(f"  put+wait+free inclusive: {tot:.0f}  (gw_put {api.get('gw_put', 0):.0f}, "
                  f"gw_request_wait {api.get('gw_request_wait', 0):.0f}, gw_request_free {api.get('gw_request_free', 0):.0f})")
            print("  -- inclusive")
        else:
            print("  -- self")
        for v, k in rows[: 45 if incl else 60]:
            print(f"  {v:8.1f}  {k}")

# calls per put of the functions whose count depends on timing (the polls):
# the caller lines ("<", with their call counts) come before the function's
# own line ("*") in callgrind_annotate --tree=caller
def calls(f):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--tree=caller", "--auto=no", f],
                         capture_output=True, text=True).stdout
    c, pend = {}, 0
    for line in out.splitlines():
        m = re.match(r"\s*[\d,]+\s+\(\s*[\d.]+%\)\s+<\s+\S.*?\((\d[\d,]*)x\)", line)
        if m:
            pend += int(m.group(1).replace(",", ""))
            continue
        m = re.match(r"\s*[\d,]+\s+\(\s*[\d.]+%\)\s+\*\s+(\S.*?)\s+\[", line)
        if m:
            k = m.group(1).split(":")[-1]
            c[k] = c.get(k, 0) + pend
            pend = 0
    return c

for side, (f1, f3) in enumerate(zip(a, b)):
    c1, c3 = calls(f1), calls(f3)
    print(f"== {name} side {side}: calls per put " + ", ".join(
        f"{k} {(c3.get(k, 0) - c1.get(k, 0)) / ROUNDS:.2f}" for k in
        ("gw_verbs_ep_progress", "poll_cq", "gw_ctx_progress_until", "gw_progress", "gw_ep_op_done")))
