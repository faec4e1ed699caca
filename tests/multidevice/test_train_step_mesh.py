"""The real train step on meshes of 8 devices against the same step on one device.

With SGD (no momentum, decay or clipping) at lr 1 the update is minus the gradient, so the
parameters after one step give the step's gradient (to the rounding of ``p - g``, one float32
ulp of the parameter); AdamW would turn float32 reduction-order noise on near-zero gradients
into full steps.
"""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import optax
import pytest
from mesh_helpers import SGD, state_and_step

import zoo_models
import zoo_train
from zoo_train import OptimizerConfig, parallel
from zoo_train.data import PackedLoader

CONFIG = zoo_models.get("llama-tiny").replace(
    vocab_size=64, n_layers=2, attention_implementation="xla"
)


def _batch(rows: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 63, rng.integers(5, 40)).astype(np.int32) for _ in range(80)]
    return PackedLoader(docs, seq_len=32, seed=seed).next_batch(rows)


def _state_and_step(mesh, optimizer_config, grad_accum: int, config=CONFIG):
    return state_and_step(config, mesh, optimizer_config=optimizer_config, grad_accum=grad_accum)


def _mesh(data: int, fsdp: int, tensor: int, devices=None):
    return parallel.make_mesh(parallel.MeshConfig(data, fsdp, tensor), devices)


@pytest.fixture(scope="module")
def batch():
    return _batch(16, seed=np.random.default_rng().integers(1 << 30))


@pytest.fixture(scope="module")
def one_device(batch):
    state, step = _state_and_step(_mesh(1, 1, 1, jax.devices()[:1]), SGD, grad_accum=2)
    before = jax.device_get(state.params)
    after, metrics = step(batch, state)
    grads = jax.tree.map(lambda a, b: a - b, before, jax.device_get(after.params))
    return jax.device_get(metrics), grads, before


@pytest.mark.parametrize(
    "shape",
    [
        (2, 2, 2),
        (1, 8, 1),
        # Micro-batches over fsdp and tensor kept in (2, 2, 2); this mesh in the q/k-norm cases.
        pytest.param((1, 4, 2), marks=pytest.mark.full),
    ],
    ids=str,
)
def test_loss_and_gradients_match_one_device(shape, batch, one_device):
    want_metrics, want_grads, params = one_device
    state, step = _state_and_step(_mesh(*shape), SGD, grad_accum=2)
    before = jax.device_get(state.params)
    after, metrics = step(batch, state)
    grads = jax.tree.map(lambda a, b: a - b, before, jax.device_get(after.params))
    np.testing.assert_allclose(metrics["loss"], want_metrics["loss"], rtol=2e-6)
    np.testing.assert_allclose(metrics["grad_norm"], want_metrics["grad_norm"], rtol=1e-5)
    trees = (grads, want_grads, params)
    for got, want, p in zip(*map(jax.tree.leaves, trees), strict=True):
        rounding = 2 * np.finfo(np.float32).eps * np.max(np.abs(p))
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want)) + rounding


def _gradients(mesh, config, batch):
    state, step = _state_and_step(mesh, SGD, grad_accum=1, config=config)
    before = jax.device_get(state.params)
    after, metrics = step(batch, state)
    grads = jax.tree.map(lambda a, b: a - b, before, jax.device_get(after.params))
    return state.params, jax.device_get(metrics), grads, before


@pytest.mark.parametrize("name", ["olmo2-tiny", "gemma3-tiny"])
def test_qk_norms_and_a_layer_tail_are_sharded_and_match_one_device(name, batch):
    """OLMo 2's q/k norms span the whole projection (sharded over ``tensor`` like it), Gemma 3's
    one head (replicated), and its 4 layers repeat a pattern of 3 (a tail after the scan)."""
    config = zoo_models.get(name).replace(vocab_size=64, attention_implementation="xla")
    _, want_metrics, want_grads, params = _gradients(
        _mesh(1, 1, 1, jax.devices()[:1]), config, batch
    )
    sharded, metrics, grads, _ = _gradients(_mesh(1, 4, 2), config, batch)
    q_norm = sharded.stack.blocks[0].attn.q_norm.weight  # [L, N*H] or [L, H]
    projection = config.qk_norm == "projection"
    spec = (
        jax.sharding.PartitionSpec(None, "tensor") if projection else jax.sharding.PartitionSpec()
    )
    assert q_norm.sharding.spec == spec
    if not projection:
        tail = sharded.stack.tail[0].attn.q_proj.weight  # [1, N*H, D]
        assert tail.sharding.spec == jax.sharding.PartitionSpec(None, "tensor", "fsdp")
    np.testing.assert_allclose(metrics["loss"], want_metrics["loss"], rtol=2e-6)
    for got, want, p in zip(*map(jax.tree.leaves, (grads, want_grads, params)), strict=True):
        rounding = 2 * np.finfo(np.float32).eps * np.max(np.abs(p))
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want)) + rounding


def test_state_is_sharded_and_the_step_keeps_its_layout(batch):
    mesh = _mesh(1, 4, 2)
    state, step = _state_and_step(mesh, OptimizerConfig(), grad_accum=1)
    q = state.params.stack.blocks[0].attn.q_proj.weight  # [L, N*H, D]: heads on tensor, D on fsdp
    n_layers, nh, d = q.shape
    assert q.sharding.spec == jax.sharding.PartitionSpec(None, "tensor", "fsdp")
    assert {s.data.shape for s in q.addressable_shards} == {(n_layers, nh // 2, d // 4)}
    embed = state.params.embed.weight  # [V, D]: vocabulary on tensor, D on fsdp
    assert {s.data.shape for s in embed.addressable_shards} == {(64 // 2, CONFIG.d_model // 4)}
    # AdamW's moments are laid out like the parameters they track.
    params = jax.tree.leaves(state.params)
    for moment in ("mu", "nu"):
        leaves = jax.tree.leaves(optax.tree_utils.tree_get(state.opt_state, moment))
        assert [m.sharding for m in leaves] == [p.sharding for p in params]

    def layout(tree):
        return [x.sharding for x in jax.tree.leaves(eqx.filter(tree, eqx.is_array))]

    before = layout(state)
    first, _ = step(batch, state)
    assert layout(first) == before
    second, _ = step(batch, first)
    assert step.compilations() == 1
    assert layout(second) == layout(first)


def test_micro_batches_split_without_moving_rows():
    # Rows [A*mb] sharded in D contiguous blocks: micro-batch i takes the i-th mb/D rows of each
    # block, so every row stays in its block; with D = 1 they are consecutive slices.
    a, mb, d = 3, 8, 4
    rows = np.arange(a * mb)
    micro = np.asarray(zoo_train.split_micro_batches({"x": rows}, a, d)["x"])
    block = a * mb // d
    for i in range(a):
        for j, row in enumerate(micro[i]):
            assert row // block == j // (mb // d)
    assert sorted(micro.ravel()) == list(rows)
    consecutive = np.asarray(zoo_train.split_micro_batches({"x": rows}, a, 1)["x"])
    np.testing.assert_array_equal(consecutive, rows.reshape(a, mb))


def test_arrays_without_names_are_fully_sharded_on_their_largest_dimension():
    mesh = _mesh(1, 8, 1)
    tree = {
        "w": jax.ShapeDtypeStruct((24, 64), "float32"),
        "b": jax.ShapeDtypeStruct((6,), "float32"),
    }
    shardings = parallel.tree_shardings(tree, mesh, parallel.make_rules())
    assert shardings["w"].spec == jax.sharding.PartitionSpec(None, "fsdp")  # 64 / 8
    assert shardings["b"].spec == jax.sharding.PartitionSpec()  # 6 rows: nothing divides


def test_an_eval_step_without_the_optimizer_uses_the_state_where_it_is(batch):
    mesh = _mesh(2, 2, 2)
    state, _ = _state_and_step(mesh, OptimizerConfig(), grad_accum=1)
    rules = parallel.make_rules()
    loss = zoo_train.make_lm_loss()
    plain = zoo_train.make_eval_step(loss, mesh=mesh, rules=rules)(batch, state)
    optimizer, _ = zoo_train.make_optimizer(OptimizerConfig(), 10, state.params)
    planned = zoo_train.make_eval_step(loss, mesh=mesh, rules=rules, optimizer=optimizer)(
        batch, state
    )
    np.testing.assert_allclose(plain["loss_sum"], planned["loss_sum"], rtol=1e-6)
