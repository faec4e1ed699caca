"""A mixture of experts on a ``context`` axis, where a step's tokens do not split over it (one
token a row when decoding, a sample after training): the layer gives the one-device output.
The context axis also shards the model width (as fsdp does); a gather of those shards inside
the layer varied over an axis its output must be the same on, and ``zoo train --mesh
expert=2,context=4`` failed at its sample after training. Training on such a mesh is
test_context_mesh.py's."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_layers
from zoo_train import parallel


@pytest.mark.parametrize("axes", [{"expert": 2, "context": 4}, {"fsdp": 2, "context": 4}], ids=str)
def test_one_token_a_row_on_a_context_mesh_gives_the_one_device_output(axes):
    key = jax.random.key(int(np.random.default_rng().integers(1 << 30)))
    layer = zoo_layers.moe.MoE(16, 32, 4, 2, key=key)
    x = jax.random.normal(jax.random.fold_in(key, 1), (2, 1, 16))  # [rows, one token, D]
    expected, _ = eqx.filter_jit(layer)(x)
    mesh = parallel.make_mesh(parallel.MeshConfig(**{"fsdp": 1, **axes}), jax.devices()[:8])
    with parallel.mesh_context(mesh, parallel.DEFAULT_RULES):
        got, stats = eqx.filter_jit(layer)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-6)
    assert float(jnp.sum(stats.tokens)) == 2.0  # each token counted once, not once a device


def test_the_command_line_no_longer_refuses_moe_on_a_context_axis():
    mesh = parallel.make_mesh(parallel.MeshConfig(fsdp=1, expert=2, context=4), jax.devices()[:8])
    parallel.check_experts(8, mesh, parallel.DEFAULT_RULES)  # raised before
