# SPDX-License-Identifier: Apache-2.0
"""vllm_spread.py - weight rescaling that vllm_disagg.py runs inside each vLLM
engine's worker (LLM.apply_model pickles the function by name, so it lives
in a module the worker process can import)."""


def spread_weights(model):
    """vLLM's dummy weights are uniform in [-1e-3, 1e-3] (every tensor from
    one fixed seed), which leaves attention flat and the output nearly
    independent of the context.  Rescaled here, in every engine alike, to a
    usable random model: matrices to a standard deviation of 1/sqrt(fan-in)
    (the embedding to 1), norm weights to 1 +- 0.1.  Deterministic: only
    the loaded values are scaled."""
    import torch
    u = 1e-3 / 3 ** 0.5  # the dummy values' standard deviation
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not torch.is_floating_point(p):
                continue
            if p.dim() == 1:
                p.mul_(100.0).add_(1.0)
            elif "embed_tokens" in name:
                p.mul_(1.0 / u)
            else:
                p.mul_(1.0 / (u * p.shape[-1] ** 0.5))
    return sum(p.numel() for p in model.parameters())
