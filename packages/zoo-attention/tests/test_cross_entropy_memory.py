"""``fused_xla`` never holds a batch's logits: the compiled loss-and-gradient's temporaries,
from XLA's own memory analysis, are a few tiles' logits and the head gradient's float32
accumulator, where the reference's reach ``N x V x 4`` bytes. Compile-only, at the sizes of
GPT-2's and Llama 3.2 1B's heads (8,192 tokens; the head in the hidden states' dtype, as a
train step casts it), through the per-token call and the summed loss."""

import jax
import jax.numpy as jnp
import pytest

from zoo_attention.cross_entropy import linear_cross_entropy, linear_cross_entropy_loss
from zoo_attention.cross_entropy._fused_policy import TILE_BYTES

HEADS = {
    # name: (tokens, width, vocabulary, hidden dtype)
    "gpt2": (8192, 768, 50257, jnp.float32),
    # XLA:CPU computes a bfloat16 product through a float32 copy of its operands: float32
    # here; the TPU compile tests measure bfloat16.
    "llama-3.2-1b": (8192, 2048, 128256, jnp.float32),
}


def _temporaries(
    implementation: str, tokens: int, dim: int, vocab: int, dtype, entry: str = "per-token"
) -> int:
    def loss(h, w, t, m):
        if entry == "summed":
            return linear_cross_entropy_loss(
                h, w, t, m, z_loss=1e-4, head_layout="vd", implementation=implementation
            )[0]
        ce, log_z = linear_cross_entropy(
            h, w, t, loss_mask=m, head_layout="vd", implementation=implementation
        )
        return jnp.sum(ce) + 1e-4 * jnp.sum(jnp.square(log_z))

    args = (
        jax.ShapeDtypeStruct((tokens, dim), dtype),
        jax.ShapeDtypeStruct((vocab, dim), dtype),
        jax.ShapeDtypeStruct((tokens,), jnp.int32),
        jax.ShapeDtypeStruct((tokens,), jnp.bool_),
    )
    step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    return step.lower(*args).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("entry", ["per-token", "summed"])
@pytest.mark.parametrize("head", sorted(HEADS))
def test_fused_temporaries_are_a_tile_not_the_logits(head: str, entry: str) -> None:
    tokens, dim, vocab, dtype = HEADS[head]
    logits_bytes = tokens * vocab * 4
    fused = _temporaries("fused_xla", tokens, dim, vocab, dtype, entry)
    plain = _temporaries("logits", tokens, dim, vocab, dtype, entry)
    print(f"{head} {entry}: logits {logits_bytes / 2**20:.0f} MiB; temporaries fused_xla "
          f"{fused / 2**20:.0f} MiB, logits {plain / 2**20:.0f} MiB")  # fmt: skip
    assert plain >= logits_bytes
    # The head gradient accumulates over the tiles in float32; the rest is a few tiles.
    assert fused <= vocab * dim * 4 + 4 * TILE_BYTES
    assert fused < logits_bytes / 3
