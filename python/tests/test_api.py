# SPDX-License-Identifier: Apache-2.0
"""Context, information calls, registration of every kind of object."""
import array
import os
import gc

import pytest

import gpuwire

np = pytest.importorskip("numpy", reason="python3-numpy not installed")


def test_version_features_settings():
    assert gpuwire.version() == gpuwire.__version__
    assert "tcp" in gpuwire.build_features()
    names = [n for n, _, _ in gpuwire.settings()]
    assert "GPUWIRE_TRANSPORTS" in names
    with gpuwire.Context(transports="tcp") as ctx:
        assert ctx.setting("GPUWIRE_TRANSPORTS")   # the variable or its default
        assert ctx.setting("NO_SUCH") is None
        tl = dict((n, ok) for n, ok, _ in ctx.transports())
        assert tl["tcp"] is True
        assert ctx.fileno() >= 0
        assert ctx.progress() >= 0


def test_progress_thread_default(monkeypatch):
    # on unless GPUWIRE_PROGRESS_THREAD says otherwise (docs/PROGRESS.md)
    monkeypatch.delenv("GPUWIRE_PROGRESS_THREAD", raising=False)
    with gpuwire.Context() as ctx:
        assert ctx.setting("GPUWIRE_PROGRESS_THREAD") == "on"
    with gpuwire.Context(progress_thread=False) as ctx:
        assert ctx.setting("GPUWIRE_PROGRESS_THREAD") == "off"
    monkeypatch.setenv("GPUWIRE_PROGRESS_THREAD", "off")
    with gpuwire.Context() as ctx:
        assert ctx.setting("GPUWIRE_PROGRESS_THREAD") == "off"
    with gpuwire.Context(progress_thread=True) as ctx:
        assert ctx.setting("GPUWIRE_PROGRESS_THREAD") == "on"


def test_context_closes_children():
    ctx = gpuwire.Context()
    buf = bytearray(100)
    m = ctx.register(buf)
    lis = ctx.listen()
    assert lis.address.startswith("127.0.0.1:")
    ctx.close()
    assert ctx.closed and m._h is None and lis._h is None
    ctx.close()   # twice is harmless
    with pytest.raises(gpuwire.InvalidArgument, match="context is closed"):
        ctx.register(buf)


def test_register_kinds_and_keepalive():
    with gpuwire.Context() as ctx:
        a = np.arange(16, dtype=np.float32)
        m = ctx.register(a)
        assert m.nbytes == 64 and m.addr == a.ctypes.data
        info = m.info()
        assert info["type"] == "host" and info["len"] == 64 and info["cuda_device"] == -1
        key = m.pack()
        assert isinstance(key, bytes) and len(key) > 16
        # the registered array stays alive through the region
        del a
        gc.collect()
        assert m.obj[3] == 3.0
        m.close()
        # buffer protocol: bytearray, array.array, memoryview, bytes (read-only)
        ba = bytearray(32)
        mb = ctx.register(ba)
        with pytest.raises(BufferError):
            ba.extend(b"x")          # the export pins it while registered
        mb.close()
        ba.extend(b"x")              # released at close
        assert ctx.register(array.array("d", [1.0] * 4)).nbytes == 32
        assert ctx.register(memoryview(bytearray(10))[2:]).nbytes == 8
        ro = ctx.register(b"hello", access=gpuwire.ACCESS_REMOTE_READ)
        assert ro.nbytes == 5
        # DLPack (a wrapper with only __dlpack__ / __dlpack_device__)

        class DL:
            def __init__(self, x):
                self.x = x

            def __dlpack__(self, stream=None):
                return self.x.__dlpack__()

            def __dlpack_device__(self):
                return self.x.__dlpack_device__()
        x = np.arange(10, dtype=np.int64)
        md = ctx.register(DL(x))
        assert md.addr == x.ctypes.data and md.nbytes == 80
        md.close()


def test_register_torch_cpu():
    torch = pytest.importorskip("torch", reason="python3-torch not installed")
    with gpuwire.Context() as ctx:
        t = torch.arange(100, dtype=torch.float64)
        m = ctx.register(t[10:20])
        assert m.addr == t.data_ptr() + 80 and m.nbytes == 80
        assert m.info()["type"] == "host"


def test_accelerator_used_when_built():
    from gpuwire import _lib
    built = [os.path.join(d, "python", "_gwfast.abi3.so")
             for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    if not any(os.path.exists(f) for f in built):
        pytest.skip("the _gwfast accelerator is not built here")
    assert _lib.fast is not None
