"""Gradients with respect to every parameter against ``transformers``' autograd (float32, eager
attention), for the families of 2026's attention: gpt-oss (sinks, YaRN, biased clamped-SwiGLU
experts) and DeepSeek-V3 (latent attention, sigmoid group-limited routing, shared experts)."""

from __future__ import annotations

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from _hf_tiny import SEQ, VOCAB, make_hf_model

import zoo_models

FAMILIES = [
    "gpt-oss",
    "deepseek-v3",
    # Latent attention and DeepSeek's experts through [deepseek-v3]'s code; its full query
    # projection has logits parity in test_hf_parity.py's round trip.
    pytest.param("deepseek-v3-q-full", marks=pytest.mark.full),
]
# transformers keeps DeepSeek's experts fused ([E, 2I, D] and [E, D, I]); checkpoints and zoo's
# names hold them one by one.
_FUSED = re.compile(r"(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight")


def _hf_gradients(model, ids: np.ndarray, cotangent: np.ndarray) -> dict[str, np.ndarray]:
    model.zero_grad()
    logits = model(torch.as_tensor(ids)).logits
    (logits * torch.as_tensor(cotangent)).sum().backward()
    return {n: p.grad.detach().numpy() for n, p in model.named_parameters() if p.grad is not None}


def _hf_gradient(grads: dict[str, np.ndarray], name: str) -> tuple[str, np.ndarray] | None:
    """The gradient transformers gives checkpoint tensor ``name``, and the parameter it is (or
    is part of); ``None`` for a tensor that is no parameter there."""
    if name in grads:
        return name, grads[name]
    fused = _FUSED.fullmatch(name)
    if fused is None:
        return None
    prefix, expert, proj = fused.group(1), int(fused.group(2)), fused.group(3)
    if proj == "down":
        return f"{prefix}.down_proj", grads[f"{prefix}.down_proj"][expert]
    gate_up = grads[f"{prefix}.gate_up_proj"][expert]  # [2I, D]
    half = gate_up.shape[0] // 2
    return f"{prefix}.gate_up_proj", gate_up[:half] if proj == "gate" else gate_up[half:]


@pytest.mark.parametrize("name", FAMILIES)
def test_gradients_equal_transformers(name: str, tmp_path) -> None:
    reference = make_hf_model(name, tmp_path)
    model = zoo_models.load_hf(tmp_path, attention_implementation="xla")
    rng = np.random.default_rng(7)
    # Not the padding id: transformers' embedding gives its row no gradient (padding_idx).
    ids = rng.integers(1, VOCAB, size=(2, SEQ))
    cotangent = rng.standard_normal((2, SEQ, VOCAB)).astype(np.float32)
    want = _hf_gradients(reference, ids, cotangent)

    @eqx.filter_jit  # compiled: a fraction of the cost of autodiff op by op
    @eqx.filter_grad
    def grad(m: zoo_models.Transformer) -> jax.Array:
        return jnp.sum(m(jnp.asarray(ids)) * jnp.asarray(cotangent))

    got = zoo_models.hf_state_dict(grad(model))
    worst, covered = 0.0, set()
    for tensor, value in got.items():
        found = _hf_gradient(want, tensor)
        if found is None:
            # Not a parameter there: DeepSeek's selection bias, which no gradient reaches.
            assert tensor.endswith("e_score_correction_bias"), tensor
            assert not np.any(value), tensor
            continue
        param, ref = found
        covered.add(param)
        assert ref.shape == value.shape, tensor
        scale = float(np.abs(ref).max())
        err = float(np.abs(value - ref).max())
        worst = max(worst, err / max(scale, 1e-6))
        assert err <= 1e-4 * max(scale, 1e-2), f"{tensor}: max |diff| {err:.2e}, scale {scale:.2e}"
    # Every parameter with a gradient there (a tied head is the embedding's) was compared.
    assert covered == set(want) - {"lm_head.weight"} or covered == set(want)
    print(f"{name}: {len(covered)} parameters, worst max|diff| / max|grad| {worst:.2e}")
