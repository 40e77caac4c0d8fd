# SPDX-License-Identifier: Apache-2.0
"""GPU suite: CUDA tensors both directions on every transport usable on one
GPU (tcp staging, intra CUDA IPC; verbs where an RDMA device exists), tensors
that are slices of the caching allocator's blocks, and the same under
expandable_segments:True (VMM memory), and paged/batched transfers of CUDA
pages with counted notifications.  Two processes per case (CUDA IPC
cannot open a handle in its own process)."""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device (torch.cuda.is_available() is False)", allow_module_level=True)

import gpuwire  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def gpu_transports():
    with gpuwire.Context() as c:
        return [n for n, ok, _ in c.transports() if ok]


@pytest.mark.parametrize("case", ["dirs", "slices", "vmm", "pages"])
@pytest.mark.parametrize("transport", gpu_transports())
def test_gpu_pair(transport, case, tmp_path):
    env = dict(os.environ)
    if case == "vmm":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    store = str(tmp_path / "store")
    args = [transport, case, store]
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "gpu_peer.py"), r] + args,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in ("target", "initiator")]
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out = p.communicate()[0] + "\nTIMEOUT"
        outs.append(out)
        print(out)
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)
    if case == "vmm":
        assert "expandable segments: True" in outs[0]
        assert "initiator expandable segments: True" in outs[1]
