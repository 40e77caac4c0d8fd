# SPDX-License-Identifier: Apache-2.0
"""gpu_peer.py ROLE TRANSPORT CASE STORE_FILE - one side of a GPU test of
test_gpu.py (run as its own process: CUDA IPC needs two).  ROLE is target or
initiator; CASE is dirs (CUDA<->CUDA, CPU<->CUDA both ways, put/get/send/recv),
slices (caching-allocator slices beside live neighbours), vmm (the same
under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, set by the caller) or
pages (paged puts of CUDA pages with counted notifications, a batch of
descriptor lists with an ordered one, a paged get back).
Exit 0 when every byte checked is right; the reason otherwise."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gpuwire  # noqa: E402
from gpuwire.store import Directory  # noqa: E402

role, transport, case, store_file = sys.argv[1:5]
N = (8 << 20) + 13          # crosses the staging and striping chunk sizes, odd length
G = torch.device(os.environ.get("GPU_PEER_DEVICE", "cuda:0"))   # "cpu": a dry run of the script


def pat(n, seed, dev):
    return ((torch.arange(n, dtype=torch.int64, device=dev) * 2654435761 + seed) % 251).to(torch.uint8)


def check(name, got, want):
    g, w = got.cpu(), want.cpu()
    if not torch.equal(g, w):
        bad = (g != w).nonzero().flatten()
        f, l = int(bad[0]), int(bad[-1])
        zero = bool((g[bad] == 0).all())
        sys.exit("%s/%s/%s: %s differs at %d bytes, first at [%d], last at [%d]; got %s want %s there%s" % (
            transport, case, role, name, bad.numel(), f, l, g[f:f + 8].tolist(), w[f:f + 8].tolist(),
            "; every differing byte is 0 (never written?)" if zero else ""))


store = dist.FileStore(store_file, 2)
ctx = gpuwire.Context(transports=transport)
d = Directory(store, ctx, timeout=120)

if case == "dirs":
    if role == "target":
        tg, th = torch.zeros(N, dtype=torch.uint8, device=G), torch.zeros(N, dtype=torch.uint8)
        tg2 = torch.zeros(N, dtype=torch.uint8, device=G)
        sg, sh = pat(N, 1, G), pat(N, 2, "cpu")
        regions = dict(tg=tg, tg2=tg2, th=th, sg=sg, sh=sh)
        mems = {k: ctx.register(v) for k, v in regions.items()}
        for k, m in mems.items():
            d.publish(k, m)
            print("target %s: %s" % (k, m.info()["path"].replace("\n", " | ")))
        d.serve("t", addr="127.0.0.1:0")
        ep = d.accept("t")
        for v in (1, 2, 3):
            assert ep.wait_notify(120) == v
        check("put G2G", tg, pat(N, 10, G))
        check("put H2G", tg2, pat(N, 11, G))
        check("put G2H", th, pat(N, 13, G))
        rg = torch.zeros(N, dtype=torch.uint8, device=G)
        rgm = ctx.register(rg)
        ep.recv(rgm, tag=5).wait(120)
        check("send G->recv G", rg, pat(N, 12, G))
        ep.send(mems["sg"], tag=6).wait(120)          # CUDA send -> host recv at the peer
        assert ep.recv_bytes(tag=7, timeout=120) == b"done"
    else:
        ep = d.connect("t")
        rk = {k: d.remote_key(ep, k) for k in ("tg", "tg2", "th", "sg", "sh")}
        src_g, src_h = pat(N, 10, G), pat(N, 11, "cpu")
        mg, mh = ctx.register(src_g), ctx.register(src_h)
        ep.put_notify(mg, rk["tg"], 1).wait(120)                     # CUDA -> CUDA
        ep.put_notify(mh, rk["tg2"], 2).wait(120)                    # host -> CUDA
        tmp = torch.zeros(N, dtype=torch.uint8, device=G)
        tm = ctx.register(tmp)
        ep.get(tm, rk["tg2"]).wait(120)                              # CUDA <- CUDA
        check("get G<-G", tmp, src_h)
        g2 = pat(N, 13, G)
        ep.put_notify(ctx.register(g2), rk["th"], 3).wait(120)       # CUDA -> host
        ep.get(tm, rk["sh"]).wait(120)                               # CUDA <- host
        check("get G<-H", tmp, pat(N, 2, "cpu"))
        hb = torch.zeros(N, dtype=torch.uint8)
        ep.get(ctx.register(hb), rk["sg"]).wait(120)                 # host <- CUDA
        check("get H<-G", hb, pat(N, 1, G))
        ep.send(ctx.register(pat(N, 12, G)), tag=5).wait(120)
        hr = torch.zeros(N, dtype=torch.uint8)
        ep.recv(hr, tag=6).wait(120)
        check("recv H <- send G", hr, pat(N, 1, G))
        ep.send_bytes(b"done", tag=7)
        print("initiator: endpoint %s" % ep.info()["path"])
elif case == "pages":
    P, NP = 16 << 10, 256                 # 16 KiB pages, 256 of them on each side
    lp = torch.randperm(NP, generator=torch.Generator().manual_seed(3))[:192].to(torch.int32)
    rp = torch.randperm(NP, generator=torch.Generator().manual_seed(4))[:192].to(torch.int32)
    if role == "target":
        cache = torch.zeros(NP * P, dtype=torch.uint8, device=G)
        m = ctx.register(cache)
        d.publish("cache", m)
        d.serve("t", addr="127.0.0.1:0")
        ep = d.accept("t")
        ep.wait_count(9, 4 if G.type == "cuda" and transport == "intra" else 3, 120)   # the paged puts
        assert ep.wait_notify(120) == 0x99                           # then the list batch
        want = torch.zeros(NP * P, dtype=torch.uint8)
        src = pat(NP * P, 30, "cpu")
        for a, b in zip(lp.tolist(), rp.tolist()):
            want[b * P:(b + 1) * P] = src[a * P:(a + 1) * P]
        want[5:5 + 1000] = src[7000:8000]                            # the list batch's entry
        check("paged puts", cache, want)
        assert ep.recv_bytes(tag=7, timeout=120) == b"done"
    else:
        ep = d.connect("t")
        rk = d.remote_key(ep, "cache")
        src = pat(NP * P, 30, G)
        if G.type == "cuda":
            torch.cuda.synchronize()
        sm = ctx.register(src)
        if G.type == "cuda":
            for bad, what in (((lp.to(G), rp), "in host memory and"),          # one side on the GPU
                              ((lp.to(G).long(), rp.to(G)), "int32 or uint32")):
                try:
                    ep.put_pages(sm, rk, P, *bad)
                    sys.exit("pages: index tensors %s/%s were accepted" % (bad[0].device, bad[1].device))
                except gpuwire.InvalidArgument as e:
                    assert what in str(e), e
        reqs = [ep.put_pages(sm, rk, P, lp[i:i + 64], rp[i:i + 64].numpy(), counted=9)
                for i in (0, 64)]
        plan = ep.prepare_put_pages(sm, rk, P, lp[128:], rp[128:], counted=9)   # the prepared form
        reqs.append(plan.post())
        if G.type == "cuda" and transport == "intra":   # the first 64 again, the index tensors on the GPU
            reqs.append(ep.put_pages(sm, rk, P, lp[:64].to(G), rp[:64].to(G), counted=9))
        elif G.type == "cuda":          # elsewhere the indices would be needed on the host: refused
            try:
                ep.put_pages(sm, rk, P, lp[:64].to(G), rp[:64].to(G), counted=9)
                sys.exit("pages: index tensors on %s were accepted over %s" % (G, transport))
            except gpuwire.GwError as e:
                assert "GW_INDEX_DEVICE" in str(e), e
        assert [r.wait(120) for r in reqs] == [64 * P] * len(reqs)
        L = ctx.dlist_local([(sm, 7000, 1000)])
        R = ep.dlist_remote([(rk, 5, 1000)], access=gpuwire.ACCESS_REMOTE)
        ep.put_batch(L, R, notify=0x99).wait(120)
        back = torch.zeros(192 * P, dtype=torch.uint8, device=G)
        ep.get_pages(ctx.register(back), rk, P, None, rp.tolist()).wait(120)
        exp = torch.cat([src[a * P:(a + 1) * P] for a in lp.tolist()])
        # remote page rp[i] holds local page lp[i] except where the list batch wrote
        for i, b in enumerate(rp.tolist()):
            if b == 0:
                exp[i * P + 5:i * P + 1005] = src[7000:8000]
        check("paged get", back, exp)
        ep.send_bytes(b"done", tag=7)
        print("initiator: endpoint %s" % ep.info()["path"])
else:   # slices / vmm: registered tensors are parts of allocator blocks with live neighbours
    n = N if case == "slices" else (96 << 20) + 7
    if role == "target":
        a = torch.zeros(1000, dtype=torch.float32, device=G)       # small: 2 MiB pool block
        b = torch.zeros(3000, dtype=torch.uint8, device=G)          # same block as a
        c = torch.zeros(500, dtype=torch.float32, device=G)
        big = torch.zeros(n + 2 * 4099, dtype=torch.uint8, device=G)
        sl = big[4099:4099 + n]
        regions = dict(b=b, sl=sl)
        for k, v in regions.items():
            m = ctx.register(v)
            d.publish(k, m)
            print("target %s at %#x+%d: %s" % (k, v.data_ptr(), v.numel(),
                                               m.info()["path"].replace("\n", " | ")))
        if case == "vmm" and G.type == "cuda":
            segs = torch.cuda.memory_snapshot()
            print("expandable segments:", any(s.get("is_expandable") for s in segs))
        d.serve("t", addr="127.0.0.1:0")
        ep = d.accept("t")
        assert ep.wait_notify(120) == 1
        check("slice", sl, pat(n, 20, G))
        check("small tensor in a shared block", b, pat(3000, 21, G))
        check("neighbours", torch.cat([a.view(torch.uint8), c.view(torch.uint8), big[:4099],
                                       big[4099 + n:]]),
              torch.zeros(4000 + 2000 + 2 * 4099, dtype=torch.uint8))
        assert ep.recv_bytes(tag=7, timeout=120) == b"done"
    else:
        ep = d.connect("t")
        rsl, rb = d.remote_key(ep, "sl"), d.remote_key(ep, "b")
        pad = torch.zeros(333, device=G)                             # src is a slice too
        src = torch.empty(n + 1000, dtype=torch.uint8, device=G)
        s = src[777:777 + n]
        s.copy_(pat(n, 20, G))
        small = pat(3000, 21, G)
        if G.type == "cuda":
            torch.cuda.synchronize()
        if case == "vmm" and G.type == "cuda":   # the initiator's side is VMM memory too
            print("initiator expandable segments:",
                  any(x.get("is_expandable") for x in torch.cuda.memory_snapshot()))
        ep.put(ctx.register(s), rsl, track=False)
        ep.put_notify(ctx.register(small), rb, 1).wait(120)
        back = torch.zeros(n, dtype=torch.uint8, device=G)
        ep.get(ctx.register(back), rsl).wait(120)
        check("get of the slice", back, pat(n, 20, G))
        ep.send_bytes(b"done", tag=7)
        print("initiator: endpoint %s" % ep.info()["path"])
ctx.close()
print("%s/%s/%s: OK" % (transport, case, role))
