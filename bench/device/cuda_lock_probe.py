# SPDX-License-Identifier: Apache-2.0
"""cuda_lock_probe.py - which CUDA driver calls wait behind an application's
blocking copy.

The NCCL plugin with GPU buffers over intra or tcp staging makes CUDA calls
on NCCL's proxy thread; under PyTorch a rank stopped when the application's
`tensor.cpu()` (a copy to pageable memory on the legacy default stream,
waiting for the collective's kernel) held the driver and the proxy's
`cuMemcpyAsync` waited for it (docs/NCCL.md, "GPU buffers").  This probe
measures that mechanism alone, with no NCCL: thread A queues a kernel that
spins for SLEEP_MS on the default stream and then copies a tensor to
pageable host memory (it returns when the kernel is done); while A waits,
thread B times one call of each kind below, each on a non-blocking stream
of its own.  A call that takes about the rest of A's wait was held behind
A's copy; one that returns in microseconds was not.

  B's calls:
    primary   cuMemcpyAsync device->device in the primary context (what
              the plugin's copies are today)
    own-ctx   cuMemcpyAsync device->device between buffers of a context B
              created itself (cuCtxCreate), on its own stream
    peer-ctx  cuMemcpyPeerAsync from a primary-context buffer into an
              own-context buffer, on the own context's stream
    query     cuStreamQuery on the primary context's non-blocking stream
    own-uva   cuMemcpyAsync on the own context's stream from a buffer of the
              primary context (cudaMalloc through PyTorch), by its unified
              address, into an own-context buffer
    own-vmm   the same from a VMM allocation (cuMemCreate/cuMemMap, access
              set for the device) made while the primary context was current
    launch    (none: kernels are launched by torch in A only)

  python3 bench/device/cuda_lock_probe.py [--sleep-ms 1500]
Prints one line per call with its duration and whether it was held.
"""
import argparse
import ctypes
import threading
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sleep-ms", type=int, default=1500)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print("SKIP: no torch: %s" % e)
        return 77
    if not torch.cuda.is_available():
        print("SKIP: torch has no CUDA device")
        return 77
    cu = ctypes.CDLL("libcuda.so.1")
    u64 = ctypes.c_uint64
    vp = ctypes.c_void_p

    def ck(r, what):
        if r != 0:
            raise RuntimeError("%s failed: CUresult %d" % (what, r))

    torch.cuda.init()
    dev = torch.device("cuda:0")
    n = 64 << 20
    x = torch.ones(n // 4, device=dev)  # A's tensor
    s1 = torch.empty(n, dtype=torch.uint8, device=dev)
    s2 = torch.empty(n, dtype=torch.uint8, device=dev)
    # B's resources, made before A starts
    prim = vp()
    ck(cu.cuCtxGetCurrent(ctypes.byref(prim)), "cuCtxGetCurrent")
    pstream = vp()
    ck(cu.cuStreamCreate(ctypes.byref(pstream), 1), "cuStreamCreate(primary)")
    cudev = ctypes.c_int()
    ck(cu.cuDeviceGet(ctypes.byref(cudev), 0), "cuDeviceGet")
    own = vp()
    create = getattr(cu, "cuCtxCreate_v2", None) or cu.cuCtxCreate
    ck(create(ctypes.byref(own), 0, cudev), "cuCtxCreate")
    o1, o2 = u64(), u64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(o1), ctypes.c_size_t(n)), "cuMemAlloc(own)")
    ck(cu.cuMemAlloc_v2(ctypes.byref(o2), ctypes.c_size_t(n)), "cuMemAlloc(own)")
    ostream = vp()
    ck(cu.cuStreamCreate(ctypes.byref(ostream), 1), "cuStreamCreate(own)")
    ck(cu.cuCtxSetCurrent(prim), "cuCtxSetCurrent(primary)")
    # a VMM allocation of n bytes on device 0, made in the primary context
    class Loc(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

    class Prop(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int), ("handleTypes", ctypes.c_int), ("location", Loc),
                    ("win32", ctypes.c_void_p), ("flags", ctypes.c_ubyte * 8)]

    class Access(ctypes.Structure):
        _fields_ = [("location", Loc), ("flags", ctypes.c_int)]

    prop = Prop(1, 0, Loc(1, 0), None)
    gran = ctypes.c_size_t()
    ck(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0), "cuMemGetAllocationGranularity")
    vsz = (n + gran.value - 1) // gran.value * gran.value
    vptr, vh = u64(), u64()
    ck(cu.cuMemAddressReserve(ctypes.byref(vptr), ctypes.c_size_t(vsz), ctypes.c_size_t(0), u64(0), u64(0)),
       "cuMemAddressReserve")
    ck(cu.cuMemCreate(ctypes.byref(vh), ctypes.c_size_t(vsz), ctypes.byref(prop), u64(0)), "cuMemCreate")
    ck(cu.cuMemMap(vptr, ctypes.c_size_t(vsz), ctypes.c_size_t(0), vh, u64(0)), "cuMemMap")
    acc = Access(Loc(1, 0), 3)
    ck(cu.cuMemSetAccess(vptr, ctypes.c_size_t(vsz), ctypes.byref(acc), ctypes.c_size_t(1)), "cuMemSetAccess")
    torch.cuda.synchronize()

    calls = [
        ("primary", prim, lambda: cu.cuMemcpyAsync(u64(s2.data_ptr()), u64(s1.data_ptr()), ctypes.c_size_t(n), pstream)),
        ("own-ctx", own, lambda: cu.cuMemcpyAsync(o2, o1, ctypes.c_size_t(n), ostream)),
        ("peer-ctx", own, lambda: cu.cuMemcpyPeerAsync(o2, own, u64(s1.data_ptr()), prim, ctypes.c_size_t(n), ostream)),
        ("query", prim, lambda: cu.cuStreamQuery(pstream)),
        ("own-uva", own, lambda: cu.cuMemcpyAsync(o2, u64(s1.data_ptr()), ctypes.c_size_t(n), ostream)),
        ("own-vmm", own, lambda: cu.cuMemcpyAsync(o2, vptr, ctypes.c_size_t(n), ostream)),
    ]
    t = time.monotonic()
    torch.cuda._sleep(int(2e8))
    torch.cuda.synchronize()
    hz = 2e8 / (time.monotonic() - t)  # the spin's cycles per second, measured
    cycles = int(a.sleep_ms * 1e-3 * hz)
    print("# cuda_lock_probe: A spins %d ms on the default stream, then x.cpu(); B times each call while A waits"
          % a.sleep_ms)
    held_any = False
    for name, ctx, fn in calls:
        ready = threading.Event()
        done = {}

        def thread_a():
            torch.cuda._sleep(cycles)
            ready.set()
            t = time.monotonic()
            x.cpu()  # pageable, legacy default stream: waits for the spin
            done["a"] = time.monotonic() - t

        ta = threading.Thread(target=thread_a)
        ta.start()
        ready.wait()
        time.sleep(0.2)  # A is inside its copy by now
        ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        t = time.monotonic()
        r = fn()
        dt = time.monotonic() - t
        fin = ""
        if ctx is own and r == 0:  # did the copy also finish while A waited?
            while cu.cuStreamQuery(ostream) != 0 and time.monotonic() - t < 5:
                pass
            fin = "; finished after %.3f ms%s" % ((time.monotonic() - t) * 1e3,
                                                  "" if ta.is_alive() else " (A done by then)")
        ck(cu.cuCtxSetCurrent(prim), "cuCtxSetCurrent")
        ta.join()
        left = done["a"] - 0.2
        held = dt > 0.5 * left
        held_any |= held
        print("%-9s %10.3f ms  (A's copy waited %.0f ms; CUresult %d)  %s%s"
              % (name, dt * 1e3, done["a"] * 1e3, r, "HELD behind A's copy" if held else "not held", fin))
        torch.cuda.synchronize()
        cu.cuStreamSynchronize(pstream)
        cu.cuCtxSetCurrent(own)
        cu.cuStreamSynchronize(ostream)
        cu.cuCtxSetCurrent(prim)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
