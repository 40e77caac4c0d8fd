#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that every relative link in the project's Markdown documentation
points at something that exists.

    python3 scripts/check-doc-links.py [ROOT]     # exit 1 when one does not,
                                                  # or on a session tag
    python3 scripts/check-doc-links.py --selftest # the tag check on known cases

Files checked: README.md, docs/*.md, every *.md under docs/results/,
python/README.md and the README.md files under bench/ and tests/.

A link [text](target) or ![alt](target), or a reference definition
"[name]: target", resolves when target (relative to the file that holds
it) names an existing file or folder. A "#anchor" (alone, or after a .md
target) must match a heading of that file, named as GitHub names them:
the heading's text lower-cased, markup and punctuation dropped, spaces
made hyphens, "-1", "-2" ... after repeats. URLs (scheme:), mail links and
anything inside fenced code blocks or `inline code` are skipped.

It also fails on history where users read (README.md, docs/*.md,
python/README.md; code blocks included): a work-session tag, as a path
component ("results/x-s12/", "lat-s17-1.txt") or a word ("s12", "s17a"),
"session 12", and a ticket of ours ("issue 31", "ticket #4", a bare "#31";
an upstream one written "owner/repo#N" or "repo#N" is a reference and
passes). The history lives in git log and in the README.md of the
docs/results/ folder that holds a measurement's logs.
"""
import glob
import os
import re
import sys

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`+[^`\n]*`+")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def doc_files(root):
    pats = ["README.md", "docs/*.md", "docs/results/**/*.md", "python/README.md",
            "bench/**/README.md", "tests/**/README.md"]
    out = set()
    for p in pats:
        for f in glob.glob(os.path.join(root, p), recursive=True):
            rel = os.path.relpath(f, root)
            if rel.split(os.sep)[0] in ("build", ".git"):
                continue
            out.add(rel)
    return sorted(out)


def strip_code(text):
    text = FENCE.sub("", text)
    return INLINE_CODE.sub("", text)


def slug(heading):
    h = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    h = re.sub(r"<[^>]+>", "", h)                           # inline HTML
    h = h.strip().lower()
    h = "".join(c for c in h if c.isalnum() or c in " -_")
    return h.replace(" ", "-")


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        with open(path, encoding="utf-8") as fh:
            text = FENCE.sub("", fh.read())
        seen = {}
        names = set()
        for m in HEADING.finditer(text):
            s = slug(m.group(2))
            n = seen.get(s, 0)
            names.add(s if n == 0 else "%s-%d" % (s, n))
            seen[s] = n + 1
        _anchor_cache[path] = names
    return _anchor_cache[path]


# Session tags and our ticket numbers, in the files users read first.
HISTORY_FILES = ["README.md", "docs/*.md", "python/README.md"]
HISTORY = [
    (re.compile(r"[-_]s[0-9]{1,3}[a-z]*(?=[-_./)\s\]]|$)", re.M),
     "session tag in a path"),
    (re.compile(r"(?<![A-Za-z0-9_./-])s[0-9]{1,3}[a-z]?(?![A-Za-z0-9_])"),
     "session tag"),
    (re.compile(r"\bsessions?\s*(?:#|no\.?\s*)?[0-9]+", re.I),
     "session number"),
    (re.compile(r"\b(?:issue|ticket)s?\s*(?:#|no\.?\s*)?[0-9]+", re.I),
     "ticket number"),
    (re.compile(r"(?<![\w/(#-])#[0-9]+(?![\w-])"), "bare ticket number"),
]


def history_files(root):
    out = set()
    for p in HISTORY_FILES:
        for f in glob.glob(os.path.join(root, p)):
            out.add(os.path.relpath(f, root))
    return sorted(out)


def check_history(root, rel):
    bad = []
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    for n, line in enumerate(lines, 1):
        for rx, what in HISTORY:
            for m in rx.finditer(line):
                bad.append("%s:%d: %s %r (history belongs in git log or the "
                           "results folder's README.md)" % (rel, n, what, m.group(0).strip()))
    return bad


def check(root, rel):
    bad = []
    full = os.path.join(root, rel)
    with open(full, encoding="utf-8") as fh:
        text = strip_code(fh.read())
    targets = [m.group(1) for m in LINK.finditer(text)]
    targets += [m.group(1) for m in REFDEF.finditer(text)]
    for t in targets:
        if SCHEME.match(t):
            continue
        path_part, _, anchor = t.partition("#")
        if path_part:
            path = os.path.normpath(os.path.join(os.path.dirname(full), path_part))
        else:
            path = full
        if not os.path.exists(path):
            bad.append("%s: broken link %s (no such file or folder)" % (rel, t))
            continue
        if anchor and path.endswith(".md") and os.path.isfile(path):
            if anchor.lower() not in anchors(path):
                bad.append("%s: broken link %s (no heading #%s in %s)"
                           % (rel, t, anchor, os.path.relpath(path, root)))
    return bad


SELFTEST_BAD = [
    ("see results/h100-s12/ for it", "session tag in a path"),
    ("the log lat-s17-1.txt", "session tag in a path"),
    ("measured in s12 and s17a", "session tag"),
    ("as in session 12", "session number"),
    ("fixed for issue 31", "ticket number"),
    ("see ticket #4", "ticket number"),
    ("the case of #31", "bare ticket number"),
]
SELFTEST_GOOD = [
    "upstream: NVIDIA/nccl#1939 and nccl#959",
    "a link [section 1](#1-tcp) and a heading anchor (#9-ofi)",
    "flags: -s 8, ib_write_lat -s 8, sm_90, cuda:0, s3cmd, gpus0, x86_s",
    "a TLS session, a test session starts",
]


def selftest():
    import tempfile
    fails = 0
    for text, what in SELFTEST_BAD:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "README.md"), "w", encoding="utf-8") as fh:
                fh.write("# t\n\n%s\n" % text)
            got = check_history(d, "README.md")
            if not any(": %s " % what in g for g in got):
                print("selftest: %r not caught as %s (got %r)" % (text, what, got))
                fails += 1
    for text in SELFTEST_GOOD:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "README.md"), "w", encoding="utf-8") as fh:
                fh.write("# t\n\n%s\n" % text)
            got = check_history(d, "README.md")
            if got:
                print("selftest: %r flagged: %r" % (text, got))
                fails += 1
    print("selftest: %d of %d cases wrong" % (fails, len(SELFTEST_BAD) + len(SELFTEST_GOOD)))
    return 1 if fails else 0


def main():
    if sys.argv[1:2] == ["--selftest"]:
        return selftest()
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = doc_files(root)
    if not files:
        print("check-doc-links: no Markdown files under %s" % root)
        return 2
    bad = []
    for rel in files:
        bad += check(root, rel)
    hist = []
    hfiles = history_files(root)
    for rel in hfiles:
        hist += check_history(root, rel)
    for b in bad + hist:
        print(b)
    print("%d broken link(s) in %d files; %d session or ticket tag(s) in %d files"
          % (len(bad), len(files), len(hist), len(hfiles)))
    return 1 if bad or hist else 0


if __name__ == "__main__":
    sys.exit(main())
