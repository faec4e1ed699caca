"""Mixture-of-experts train steps on meshes of 8 devices against the same step on one device: the
experts split over the ``expert`` axis (tokens exchanged between its devices), their hidden width
over ``tensor``, the rest over ``data`` and ``fsdp``; equal losses and gradients (float32, SGD,
as in test_train_step_mesh.py), and no involuntary full rematerialisation in the compiled step.
One micro-batch per step: the load-balancing loss is per micro-batch, and a mesh splits
micro-batches along other rows than one device."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from mesh_helpers import state_and_step

import zoo_models
import zoo_train
from zoo_train import parallel
from zoo_train.data import PackedLoader

AXES = ("data", "fsdp", "expert", "tensor")
# Both router losses in the objective, so their gradients are compared too.
LOSS = zoo_train.make_lm_loss(router_aux_loss=0.05, router_z_loss=1e-3)


def _config(name: str) -> zoo_models.ModelConfig:
    return zoo_models.get(name).replace(vocab_size=64, attention_implementation="xla")


def _mesh(shape: tuple[int, ...], devices=None):
    return parallel.make_mesh(parallel.MeshConfig(**dict(zip(AXES, shape, strict=True))), devices)


def _step(config, mesh, batch):
    state, step = state_and_step(config, mesh, loss_fn=LOSS)
    before = jax.device_get(state.params)
    after, metrics = step(batch, state)
    grads = jax.tree.map(lambda a, b: a - b, before, jax.device_get(after.params))
    return jax.device_get(metrics), grads, before, after.params


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(np.random.default_rng().integers(1 << 30))
    docs = [rng.integers(0, 63, rng.integers(5, 40)).astype(np.int32) for _ in range(80)]
    return PackedLoader(docs, seq_len=32, seed=1).next_batch(16)


@pytest.fixture(scope="module")
def one_device(batch):
    """family -> (config, its step on one device), each computed once."""
    cache = {}

    def get(name: str):
        if name not in cache:
            config = _config(name)
            cache[name] = config, _step(config, _mesh((1, 1, 1, 1), jax.devices()[:1]), batch)
        return cache[name]

    return get


def _case(family: str, shape: tuple[int, ...], *marks):
    return pytest.param(family, shape, marks=marks, id=f"{family}-{shape}")


FULL = pytest.mark.full
# Each mesh shape (so every axis: data, fsdp, expert, tensor) once, with Mixtral's plain MoE,
# gpt-oss's (biased router, clamped SwiGLU) and DeepSeek-V3's (a dense layer before the MoE
# one, shared experts); the rest of the product is `full`.
CASES = [
    _case("mixtral-tiny", (1, 2, 2, 2)),
    _case("gpt-oss-tiny", (2, 1, 2, 2)),
    _case("deepseek-v3-tiny", (1, 1, 8, 1)),
    # Dense and MoE layers alternating, on this mesh: kept in deepseek-v3-tiny-(1, 1, 8, 1).
    _case("qwen3-moe-tiny", (1, 1, 8, 1), FULL),
    _case("qwen3-moe-tiny", (1, 2, 2, 2), FULL),  # mesh kept in mixtral-tiny-(1, 2, 2, 2)
    _case("gpt-oss-tiny", (1, 2, 2, 2), FULL),  # mesh kept in mixtral-tiny-(1, 2, 2, 2)
    _case("deepseek-v3-tiny", (1, 2, 2, 2), FULL),  # mesh kept in mixtral-tiny-(1, 2, 2, 2)
    _case("mixtral-tiny", (1, 1, 8, 1), FULL),  # mesh kept in deepseek-v3-tiny-(1, 1, 8, 1)
    _case("gpt-oss-tiny", (1, 1, 8, 1), FULL),  # mesh kept in deepseek-v3-tiny-(1, 1, 8, 1)
    _case("mixtral-tiny", (2, 1, 2, 2), FULL),  # mesh kept in gpt-oss-tiny-(2, 1, 2, 2)
    _case("qwen3-moe-tiny", (2, 1, 2, 2), FULL),  # mesh kept in gpt-oss-tiny-(2, 1, 2, 2)
    _case("deepseek-v3-tiny", (2, 1, 2, 2), FULL),  # mesh kept in gpt-oss-tiny-(2, 1, 2, 2)
]


@pytest.mark.parametrize(("family", "shape"), CASES)
def test_expert_parallel_step_matches_one_device(family, shape, one_device, batch, capfd):
    config, (want_metrics, want_grads, params, _) = one_device(family)
    capfd.readouterr()
    metrics, grads, _, sharded = _step(config, _mesh(shape), batch)
    compile_log = capfd.readouterr().err
    assert "rematerialization" not in compile_log.lower(), compile_log[-2000:]
    # The experts are split over the expert axis, their hidden width over tensor.
    layer = config.moe_layers[0] % config.period
    gate = sharded.stack.blocks[layer].mlp.gate_proj  # [L, E, D, I]
    e, t = shape[2], shape[3]
    assert {s.data.shape[1] for s in gate.addressable_shards} == {config.n_experts // e}
    assert {s.data.shape[3] for s in gate.addressable_shards} == {config.expert_width // t}
    last = f"experts/idlest/{len(config.moe_layers) - 1}"
    for name in ("loss", "moe_aux_loss", "moe_z_loss", "experts/busiest/0", last):
        np.testing.assert_allclose(metrics[name], want_metrics[name], rtol=2e-6, err_msg=name)
    np.testing.assert_allclose(metrics["grad_norm"], want_metrics["grad_norm"], rtol=1e-5)
    for got, want, p in zip(*map(jax.tree.leaves, (grads, want_grads, params)), strict=True):
        rounding = 2 * np.finfo(np.float32).eps * np.max(np.abs(p))
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want)) + rounding
