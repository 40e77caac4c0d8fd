#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# tool_info_json.sh GPUWIRE SETTINGS_DEF - `gpuwire info --json`:
# one JSON object with everything the text form prints (version,
# features, context status, transports with their reasons, every setting of
# settings.def with value, source, default and help, unknown GPUWIRE_* names)
# and with --topo the topology; a setting that does not parse makes info fail
# whatever transports are allowed.
set -u
tool=$1 def=$2
fail=0
err() { echo "FAIL: $*"; fail=1; }
command -v python3 >/dev/null || { echo "SKIP: python3 is needed to parse the JSON"; exit 77; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

GPUWIRE_TRANSPORTS=tcp GPUWIRE_TCP_STREAMS=3 GPUWIRE_NOT_A_SETTING=1 "$tool" info --json >"$tmp/all" 2>"$tmp/all.err" ||
  err "info --json exited $?: $(cat "$tmp/all.err")"
python3 - "$tmp/all" "$def" <<'PY' || fail=1
import json, re, sys
d = json.load(open(sys.argv[1]))
names = sorted(set(re.findall(r'"(GPUWIRE_[A-Z0-9_]+)"', open(sys.argv[2]).read())))
bad = []
for k in ("version", "header_version", "features", "context", "transports", "settings", "unknown_settings"):
    if k not in d: bad.append("no key " + k)
if not bad:
    if not d["version"]: bad.append("empty version")
    if "tcp" not in d["features"]: bad.append("features lack tcp: %r" % d["features"])
    if d["context"] != {"status": "GW_OK", "ok": True}: bad.append("context %r" % d["context"])
    tl = {t["name"]: t for t in d["transports"]}
    if not tl.get("tcp", {}).get("usable"): bad.append("tcp not usable: %r" % tl.get("tcp"))
    if tl.get("verbs", {}).get("usable") or "GPUWIRE_TRANSPORTS" not in tl.get("verbs", {}).get("detail", ""):
        bad.append("verbs should be unusable with the reason: %r" % tl.get("verbs"))
    st = {s["name"]: s for s in d["settings"]}
    if sorted(st) != names: bad.append("settings %s, settings.def %s" % (sorted(st), names))
    for s in d["settings"]:
        for k in ("value", "source", "default", "help", "accepts"):
            if k not in s: bad.append("%s lacks %s" % (s["name"], k))
    ts = st.get("GPUWIRE_TCP_STREAMS", {})
    if (ts.get("value"), ts.get("source"), ts.get("default")) != ("3", "env", "auto"): bad.append("TCP_STREAMS %r" % ts)
    if ts.get("accepts") != "integer 1..16, or auto": bad.append("TCP_STREAMS accepts %r" % ts.get("accepts"))
    if st.get("GPUWIRE_LOG_LEVEL", {}).get("source") != "default": bad.append("LOG_LEVEL source")
    if d["unknown_settings"] != ["GPUWIRE_NOT_A_SETTING"]: bad.append("unknown %r" % d["unknown_settings"])
for b in bad: print("FAIL: info --json:", b)
sys.exit(1 if bad else 0)
PY

# --transports / --settings select parts; --topo adds the topology
"$tool" info --json --transports >"$tmp/tl" 2>&1 || err "info --json --transports exited $?"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if "transports" in d and "settings" not in d else 1)' \
  "$tmp/tl" || err "info --json --transports: $(cat "$tmp/tl")"
"$tool" info --json --settings --topo >"$tmp/topo" 2>"$tmp/topo.err"
rc=$?
if grep -q 'topology support not built' "$tmp/topo.err"; then
  echo "topology not built into this tool: --topo part not checked"
else
  [ $rc = 0 ] || err "info --json --settings --topo exited $rc: $(cat "$tmp/topo.err")"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if isinstance(d.get("topology"), dict) and "settings" in d else 1)' \
    "$tmp/topo" || err "info --json --settings --topo: no topology object"
fi

# a setting that does not parse fails, also when its transport is not allowed
for bad in "GPUWIRE_TCP_STREAMS=banana" "GPUWIRE_IB_QPS=lots" "GPUWIRE_TRANSPORTS=intra,,tcp"; do
  env GPUWIRE_TRANSPORTS=intra "$bad" "$tool" info --json >"$tmp/bad" 2>&1
  rc=$?
  [ $rc = 1 ] || err "$bad: info exited $rc, expected 1"
  grep -q '"status":"GW_ERR_CONFIG"' "$tmp/bad" || err "$bad: no GW_ERR_CONFIG in $(cat "$tmp/bad")"
done
[ $fail = 0 ] && echo "tool_info_json: all checks passed"
exit $fail
