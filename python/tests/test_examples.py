# SPDX-License-Identifier: Apache-2.0
"""The examples run as a user would run them (their own processes), on the
CPU here and on a GPU where one is present; each checks what arrived and
exits non-zero otherwise."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="python3-torch not installed (the examples use torch)")
EX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


def run(script, *args, env=None):
    p = subprocess.run([sys.executable, os.path.join(EX, script)] + list(args),
                       capture_output=True, text=True, timeout=400,
                       env=dict(os.environ, **(env or {})))
    print(p.stdout, p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


@pytest.mark.parametrize("transport", ["default", "tcp"])
def test_kv_cache_transfer(transport):
    """Paged puts with one counted notification per layer (two per layer with
    --chunks 2), over the transport the context picks (intra here) and tcp."""
    env = {"GPUWIRE_TRANSPORTS": "tcp"} if transport == "tcp" else None
    out = run("kv_cache_transfer.py", "--layers", "6", "--requests", "3", "--chunks", "2", env=env)
    assert "arrived intact over %s" % ("tcp" if transport == "tcp" else "") in out
    assert "2 paged put(s)" in out and "kv_cache_transfer: OK" in out


def test_kv_cache_transfer_put_notify():
    out = run("kv_cache_transfer.py", "--layers", "4", "--requests", "2", "--mode", "notify")
    assert "a put per page, a put_notify per layer" in out and "kv_cache_transfer: OK" in out


def test_weight_sync():
    out = run("weight_sync.py", "--inference", "3", "--steps", "3")
    assert out.count("checked") == 3 and "weight_sync: OK" in out
