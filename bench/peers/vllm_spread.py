# SPDX-License-Identifier: Apache-2.0
"""vllm_spread.py - weight rescaling that vllm_disagg.py runs inside each vLLM
engine's worker (LLM.apply_model pickles the function by name, so it lives
in a module the worker process can import)."""

# vLLM's dummy weights are uniform in [-1e-3, 1e-3], every tensor drawn from
# one fixed seed.  With them attention is flat, and greedy output follows
# the last token alone (it settles on one token or a two-token cycle,
# whatever came before), so an identity check would say little about the
# KV cache.  Rescaled (in every engine alike; only the loaded values are
# scaled, so it stays deterministic): matrices to a standard deviation of
# 1/sqrt(fan-in), the embedding to EMB_STD, the query and key rows of each
# attention's fused projection QK_GAIN times more (peaked attention), norm
# weights to 1 +- 0.1.  Checked with the same values in a transformers
# Llama on the driver's prompts: outputs of 3-20 distinct tokens per
# prompt, each changed by changing the prompt's first token.
EMB_STD = 0.3
QK_GAIN = 5.0


def spread_weights(model):
    import torch
    u = 1e-3 / 3 ** 0.5  # the dummy values' standard deviation
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not torch.is_floating_point(p):
                continue
            if p.dim() == 1:
                p.mul_(100.0).add_(1.0)
            elif "embed_tokens" in name:
                p.mul_(EMB_STD / u)
            else:
                p.mul_(1.0 / (u * p.shape[-1] ** 0.5))
        n = 0
        for mod in model.modules():
            if hasattr(mod, "qkv_proj") and hasattr(mod, "q_size") and hasattr(mod, "kv_size"):
                mod.qkv_proj.weight[: mod.q_size + mod.kv_size].mul_(QK_GAIN)
                n += 1
    return n
