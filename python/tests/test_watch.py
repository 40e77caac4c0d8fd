# SPDX-License-Identifier: Apache-2.0
"""Peer events from Python (gw_peer_watch / gw_peer_event_next): an agent
that dies leaves the directory and one that starts again comes back, seen
through the queue (peer_event / peer_events) and through a callback run by
progress().  The directory is a private etcd started here (skipped without
the etcd binary, as tests/names/names_etcd does); the peer-to-peer form has
no watch and says so."""
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

import gpuwire

HERE = os.path.dirname(os.path.abspath(__file__))
ETCD = os.environ.get("GWT_ETCD") or shutil.which("etcd") or \
    next((p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if os.access(p, os.X_OK)), None)

# an agent in its own process, so that it can be killed: it joins the
# directory as argv[1], says "ready" and serves (accepts, progresses) until
# killed; a gpuwire thread renews its lease
AGENT = """
import sys, time
sys.path.insert(0, %r)
import gpuwire
ctx = gpuwire.Context(transports="tcp")
ctx.agent_listen(sys.argv[1], "127.0.0.1:0")
print("ready", flush=True)
end = time.monotonic() + 600
while time.monotonic() < end:
    ctx.progress()
    ctx.wait(0.05)
""" % os.path.dirname(HERE)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


@pytest.fixture
def etcd(monkeypatch):
    if not ETCD:
        pytest.skip("no etcd binary (Debian: apt-get install etcd-server; or set GWT_ETCD)")
    d = tempfile.mkdtemp(prefix="gwpy-etcd-")
    c, p = free_port(), free_port()
    curl, purl = "http://127.0.0.1:%d" % c, "http://127.0.0.1:%d" % p
    log = open(os.path.join(d, "etcd.log"), "wb")
    proc = subprocess.Popen([ETCD, "--data-dir", os.path.join(d, "data"), "--listen-client-urls",
                             curl, "--advertise-client-urls", curl, "--listen-peer-urls", purl,
                             "--initial-advertise-peer-urls", purl, "--initial-cluster",
                             "default=" + purl], stdout=log, stderr=log)
    end = time.monotonic() + 30
    while True:
        try:
            req = urllib.request.Request(curl + "/v3/kv/range", data=b'{"key":"AA=="}')
            urllib.request.urlopen(req, timeout=1).read()
            break
        except OSError:
            assert proc.poll() is None, "etcd exited early (see %s/etcd.log)" % d
            assert time.monotonic() < end, "etcd did not answer within 30 s"
            time.sleep(0.05)
    monkeypatch.setenv("GPUWIRE_DIRECTORY", "etcd://127.0.0.1:%d" % c)
    monkeypatch.setenv("GPUWIRE_DIRECTORY_PREFIX", "/gwpytest/")
    monkeypatch.setenv("GPUWIRE_DIRECTORY_TTL", "2")
    monkeypatch.delenv("GPUWIRE_AUTH_SECRET", raising=False)
    yield
    proc.kill()
    proc.wait()
    log.close()
    shutil.rmtree(d, ignore_errors=True)


def start_agent(name):
    p = subprocess.Popen([sys.executable, "-c", AGENT, name], stdout=subprocess.PIPE,
                         env=dict(os.environ))
    line = p.stdout.readline()
    assert line.strip() == b"ready", "agent %s did not start: %r" % (name, line)
    return p


def kill(p):
    p.send_signal(signal.SIGKILL)
    p.wait()


def events_until(ctx, pred, timeout):
    """Progresses ctx until pred() or timeout seconds."""
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        ctx.progress()
        ctx.wait(0.05)
    return pred()


def test_peer_to_peer_form_has_no_watch(monkeypatch):
    monkeypatch.delenv("GPUWIRE_DIRECTORY", raising=False)
    with gpuwire.Context(transports="tcp") as ctx:
        with pytest.raises(gpuwire.GwError) as e:
            ctx.peer_watch()
        assert e.value.name == "GW_ERR_UNAVAILABLE" and "peer_watch" in str(e.value)
        with pytest.raises(gpuwire.InvalidArgument, match="not callable"):
            ctx.peer_watch(callback=42)
        assert ctx.peer_event() is None                  # nothing queued, no waiting


def test_peer_event_async_times_out_and_ends_with_the_context(monkeypatch):
    """No directory here: nothing comes, so the awaited event times out
    (None), and a wait still pending when the context closes raises."""
    monkeypatch.delenv("GPUWIRE_DIRECTORY", raising=False)

    async def main():
        ctx = gpuwire.Context(transports="tcp")
        t0 = time.monotonic()
        assert await ctx.peer_event_async(0.2) is None
        assert 0.15 < time.monotonic() - t0 < 5
        assert [e async for e in ctx.peer_events_async(0.05)] == []
        pending = asyncio.ensure_future(ctx.peer_event_async())
        await asyncio.sleep(0.05)
        assert not pending.done()
        ctx.close()
        with pytest.raises(gpuwire.InvalidArgument, match="closed while awaiting a peer event"):
            await pending
    asyncio.run(asyncio.wait_for(main(), 30))


def test_left_and_back_queue_and_callback(etcd):
    with gpuwire.Context(transports="tcp") as q, gpuwire.Context(transports="tcp") as c:
        q.peer_watch(all=True)                           # every agent, queued
        seen = []
        c.peer_watch(callback=seen.append)               # the agents c used, by callback
        assert q.peer_event() is None
        a = start_agent("pyw")
        try:
            ev = q.peer_event(10)                        # "pyw" registered: back
            assert ev is not None and ev.type == "back" and ev.name == "pyw", ev
            assert ev.addr.startswith("127.0.0.1:") and ev.epoch > 0
            c.peer_ep("pyw")                             # c uses it from now on
            t0 = time.monotonic()
            kill(a)                                      # its lease (TTL 2 s) runs out
            left = [next((e for e in q.peer_events(10) if e.name == "pyw" and e.type == "left"),
                         None)]
            assert left[0] is not None, "no 'left' event within 10 s of SIGKILL"
            assert left[0].epoch > 0 and left[0].dropped == 0
            assert events_until(c, lambda: any(e.type == "left" for e in seen), 10), seen
            assert time.monotonic() - t0 < 12
            a = start_agent("pyw")                       # a new context under the same name
            ev = q.peer_event(10)
            assert ev is not None and ev.type == "back" and ev.name == "pyw", ev
            assert ev.restarted and ev.epoch > left[0].epoch, ev
            assert events_until(c, lambda: any(e.type == "back" for e in seen), 10), seen
            back = [e for e in seen if e.type == "back"][0]
            assert back.name == "pyw" and back.restarted and "back" in repr(back)
            assert all(e.name == "pyw" for e in seen)    # c watches only what it used
        finally:
            kill(a)
        # a callback that raises (the agent just killed leaves): its exception
        # comes out of progress()
        def boom(ev):
            raise RuntimeError("callback saw %s" % ev.name)
        c.peer_watch(callback=boom)
        q.peer_unwatch()
        assert q.peer_event() is None                    # stopped: queued ones discarded
        with pytest.raises(RuntimeError, match="callback saw pyw"):
            events_until(c, lambda: False, 10)


def test_peer_events_asyncio(etcd):
    """peer_event_async / peer_events_async: the events of the queue awaited
    from an asyncio loop that keeps running other tasks meanwhile (the
    context progressed from the loop through its fd), and a watch with a
    callback refused with a clear error."""
    async def main():
        loop = asyncio.get_running_loop()
        with gpuwire.Context(transports="tcp") as q:
            q.peer_watch(all=True)
            assert await q.peer_event_async(0.1) is None
            ticks = [0]

            async def ticker():
                while True:
                    await asyncio.sleep(0.01)
                    ticks[0] += 1
            tick = asyncio.ensure_future(ticker())
            a = await loop.run_in_executor(None, start_agent, "pya")
            try:
                ev = await q.peer_event_async(10)
                assert ev is not None and ev.type == "back" and ev.name == "pya", ev
                before = ticks[0]
                kill(a)                                  # its lease (TTL 2 s) runs out
                left = None
                async for e in q.peer_events_async(10):
                    if e.name == "pya" and e.type == "left":
                        left = e
                        break
                assert left is not None, "no 'left' event within 10 s of SIGKILL"
                assert ticks[0] > before + 20, "the loop did not run while awaiting"
            finally:
                kill(a)
                tick.cancel()
            q.peer_watch(callback=lambda e: None)
            with pytest.raises(gpuwire.InvalidArgument, match="peer_watch was given a callback"):
                await q.peer_event_async(0.1)
    asyncio.run(asyncio.wait_for(main(), 60))
