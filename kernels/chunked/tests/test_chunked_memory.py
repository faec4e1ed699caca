"""Memory is O(T): compile long sequences and read XLA's own buffer accounting.

Nothing runs; ``memory_analysis`` reports the temporaries the compiled program allocates.
A [T, S] score matrix at T = 16k is 1 GiB per head in float32; the kernel's temporaries are
a few copies of the inputs in the blocked layouts plus one block pair of logits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import zoo_attention

B, N, K, H = 1, 4, 2, 64


def _temp_bytes(t: int, *, grad: bool) -> int:
    q = jax.ShapeDtypeStruct((B, t, N, H), jnp.float32)
    kv = jax.ShapeDtypeStruct((B, t, K, H), jnp.float32)

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return zoo_attention.dot_product_attention(
            q, k, v, is_causal=True, implementation="chunked"
        )

    fn = jax.grad(lambda *a: jnp.sum(attend(*a)), argnums=(0, 1, 2)) if grad else attend
    compiled = jax.jit(fn).lower(q, kv, kv).compile()
    return int(compiled.memory_analysis().temp_size_in_bytes)


def test_forward_and_backward_memory_is_linear_in_length() -> None:
    t = 16384
    scores = B * N * t * t * 4  # the float32 [B, N, T, S] logits a materialising kernel holds
    forward = _temp_bytes(t, grad=False)
    backward = _temp_bytes(t, grad=True)
    half = _temp_bytes(t // 2, grad=True)
    print(
        f"\nT={t}: forward temp {forward / 2**20:.0f} MiB, forward+backward temp "
        f"{backward / 2**20:.0f} MiB (T={t // 2}: {half / 2**20:.0f} MiB); "
        f"score matrix {scores / 2**20:.0f} MiB"
    )
    # The temporaries are a handful of input-sized copies: ~T·N·H, against T²·N for the scores.
    assert forward < scores / 40
    assert backward < scores / 20
    # Doubling T doubles the temporaries (a T² term would quadruple them).
    assert backward < 2.3 * half
