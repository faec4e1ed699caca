"""The benchmark's FLOP formula against XLA's own count of the compiled forward pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_models
from bench.harness import flops_per_token, gpt2_matmul_params
from bench.training_zoo import zoo_config


@pytest.mark.parametrize(("n_layer", "n_embd", "seq_len"), [(2, 64, 64), (3, 96, 128)])
def test_forward_flops_match_xla_cost_analysis(n_layer: int, n_embd: int, seq_len: int) -> None:
    rng = np.random.default_rng(n_layer)
    vocab = int(rng.integers(200, 400))
    arch = {
        "n_layer": n_layer,
        "n_embd": n_embd,
        "n_head": 4,
        "n_positions": seq_len,
        "vocab_size": vocab,
    }
    # The xla kernel computes the full T×T scores, as the formula counts them. XLA's cost
    # analysis counts a while-loop body once, so every layer goes into one scan step.
    config = zoo_config(arch, attention="xla").replace(window_pattern=(False,) * n_layer)
    model = zoo_models.build(config, key=jax.random.key(0))
    batch = 2
    ids = jnp.asarray(rng.integers(0, vocab, (batch, seq_len)), jnp.int32)
    cost = jax.jit(lambda m, x: m(x)).lower(model, ids).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    assert cost is not None  # XLA:CPU has a cost model
    xla_flops = float(cost["flops"])

    n_params = sum(x.size for x in jax.tree.leaves(eqx_arrays(model)))
    matmul = gpt2_matmul_params(n_params, seq_len, n_embd)
    # Forward is a third of the 6N + 12LTd train-step count.
    formula = flops_per_token(matmul, n_layer, seq_len, n_embd) / 3 * batch * seq_len
    # XLA also counts the elementwise work (norms, GELU, softmax), a few percent here.
    assert formula <= xla_flops <= 1.15 * formula, (formula, xla_flops)


def eqx_arrays(model: object) -> object:
    import equinox as eqx

    return eqx.filter(model, eqx.is_inexact_array)
