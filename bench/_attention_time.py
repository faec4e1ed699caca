"""Each framework's causal attention, forward+backward, at a training config's shape.

The training comparison uses these to split a step into matmuls, attention and the rest: zoo's
attention is whatever its default order resolves to (compiled with the train step's options),
transformers' is PyTorch's ``scaled_dot_product_attention`` (what ``sdpa`` calls).
"""

from __future__ import annotations

from typing import Any

from ._stats import median, time_calls


def jax_attention_s(batch: int, seq_len: int, heads: int, head_dim: int, repeats: int = 5) -> dict:
    """Seconds of one causal attention forward+backward through ``zoo_attention`` (median)."""
    import jax
    import jax.numpy as jnp

    import zoo_attention
    import zoo_train

    keys = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(kx, (batch, seq_len, heads, head_dim)) for kx in keys)

    def loss(q: Any, k: Any, v: Any) -> Any:
        out = zoo_attention.dot_product_attention(q, k, v, is_causal=True)
        return jnp.sum(out * out)

    grad = jax.jit(
        jax.grad(loss, argnums=(0, 1, 2)), compiler_options=zoo_train.step_compiler_options()
    )
    jax.block_until_ready(grad(q, k, v))
    times = time_calls(lambda: jax.block_until_ready(grad(q, k, v)), repeats)
    kernel = zoo_attention.last_resolution()
    return {"seconds": median(times), "kernel": None if kernel is None else kernel.kernel}


def torch_attention_s(
    batch: int, seq_len: int, heads: int, head_dim: int, repeats: int = 5
) -> dict[str, Any]:
    """Seconds of one causal ``scaled_dot_product_attention`` forward+backward (median)."""
    import torch

    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(batch, heads, seq_len, head_dim, generator=g).requires_grad_() for _ in range(3)
    )

    def step() -> None:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (out * out).sum().backward()

    step()
    return {"seconds": median(time_calls(step, repeats)), "kernel": "sdpa"}
