"""The Mixtral-shaped MoE layer through megablox on a mesh of eight devices (its experts split
over `expert`, their hidden width over `tensor`, tokens over `data` and exchanged between the
`expert` devices), in Pallas interpret mode, against the same layer through ragged_dot: equal
outputs and gradients. megablox runs inside the layer's shard_map, which checks varying axes:
``rhs``'s gradient is summed over the devices that share an expert's weights."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
import zoo_layers as zl
from zoo_train import parallel

D, HIDDEN, E, TOP_K = 64, 128, 8, 2


def test_megablox_on_an_expert_parallel_mesh_equals_ragged_dot(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ZOO_MEGABLOX_INTERPRET", "1")
    monkeypatch.delenv(zoo_attention.grouped.ENV_VAR, raising=False)
    mesh = parallel.make_mesh(parallel.MeshConfig(data=2, fsdp=1, expert=2, tensor=2))
    rules = parallel.make_rules()
    seed = int(np.random.default_rng().integers(1 << 30))
    k_moe, k_x, k_cot = jax.random.split(jax.random.key(seed), 3)
    x = jax.random.normal(k_x, (4, 12, D))
    cot = jax.random.normal(k_cot, x.shape)

    def run(implementation: str):
        moe = zl.MoE(D, HIDDEN, E, TOP_K, implementation=implementation, key=k_moe)
        loss = lambda mx: jnp.sum(mx[0](mx[1])[0] * cot)
        fn = eqx.filter_jit(lambda mx: (mx[0](mx[1])[0], eqx.filter_grad(loss)(mx)))
        with jax.set_mesh(mesh), zl.axis_rules(rules), zoo_attention.recording() as log:
            out = fn((moe, x))
        return out, {r.kernel for r in log.grouped_matmul}

    with jax.default_matmul_precision("highest"):
        (got, got_grads), served = run("megablox")
        (want, want_grads), _ = run("ragged_dot")
    assert served == {"megablox"}
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"seed {seed}")
    leaves = zip(jax.tree.leaves(got_grads), jax.tree.leaves(want_grads), strict=True)
    for a, b in leaves:
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"seed {seed}")
