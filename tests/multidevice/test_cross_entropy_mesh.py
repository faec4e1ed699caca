"""The fused cross entropy on meshes of 8 devices, the vocabulary sharded over the tensor axis
and the tokens over fsdp (and data), against the plain loss on one device.

``fused_xla`` with tiles of a few dozen tokens, so every device works on every tile; the
reference is ``ZOO_CROSS_ENTROPY=logits`` on one device. With SGD at lr 1 the parameters
after one step give the step's gradient (see test_train_step_mesh).
"""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from mesh_helpers import state_and_step

import zoo_attention
import zoo_models
from zoo_attention.cross_entropy import ENV_VAR
from zoo_attention.cross_entropy._fused_policy import TILE_ENV
from zoo_train import parallel
from zoo_train.data import PackedLoader

CONFIGS = {
    "untied": zoo_models.get("llama-tiny").replace(
        vocab_size=64, n_layers=2, attention_implementation="xla"
    ),
    "tied-soft-cap": zoo_models.get("gemma2-tiny").replace(
        vocab_size=64, n_layers=2, attention_implementation="xla"
    ),
}


def _batch(rows: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 63, rng.integers(5, 40)).astype(np.int32) for _ in range(80)]
    return PackedLoader(docs, seq_len=32, seed=seed).next_batch(rows)


def _mesh(data: int, fsdp: int, tensor: int, devices=None):
    return parallel.make_mesh(parallel.MeshConfig(data, fsdp, tensor), devices)


def _step(config, mesh, batch, kernel: str, monkeypatch):
    with monkeypatch.context() as m, zoo_attention.recording() as log:
        m.setenv(ENV_VAR, kernel)
        m.setenv(TILE_ENV, "64")
        state, step = state_and_step(config, mesh)
        before = jax.device_get(state.params)
        after, metrics = step(batch, state)
        grads = jax.tree.map(lambda a, b: a - b, before, jax.device_get(after.params))
    assert {r.kernel for r in log.cross_entropy} == {kernel}
    return jax.device_get(metrics), grads, before


@pytest.fixture(scope="module")
def batch():
    return _batch(16, seed=np.random.default_rng().integers(1 << 30))


@pytest.mark.parametrize(
    ("shape", "family"),
    [
        pytest.param((1, 4, 2), "untied", id="(1, 4, 2)-untied"),
        pytest.param((2, 2, 2), "tied-soft-cap", id="(2, 2, 2)-tied-soft-cap"),
        # The tied, soft-capped head kept in (2, 2, 2)-tied-soft-cap, this mesh in (1, 4, 2)-untied.
        pytest.param(
            (1, 4, 2), "tied-soft-cap", id="(1, 4, 2)-tied-soft-cap", marks=pytest.mark.full
        ),
        # The untied head kept in (1, 4, 2)-untied, this mesh in (2, 2, 2)-tied-soft-cap.
        pytest.param((2, 2, 2), "untied", id="(2, 2, 2)-untied", marks=pytest.mark.full),
    ],
)
def test_fused_sharded_step_matches_the_plain_one_device_step(family, shape, batch, monkeypatch):
    config = CONFIGS[family]
    want_metrics, want_grads, _ = _step(
        config, _mesh(1, 1, 1, jax.devices()[:1]), batch, "logits", monkeypatch
    )
    metrics, grads, params = _step(config, _mesh(*shape), batch, "fused_xla", monkeypatch)
    np.testing.assert_allclose(metrics["loss"], want_metrics["loss"], rtol=2e-6)
    np.testing.assert_allclose(metrics["grad_norm"], want_metrics["grad_norm"], rtol=1e-5)
    for got, want, p in zip(*map(jax.tree.leaves, (grads, want_grads, params)), strict=True):
        rounding = 2 * np.finfo(np.float32).eps * np.max(np.abs(p))
        assert np.max(np.abs(got - want)) <= 1e-5 * np.max(np.abs(want)) + rounding


def _loop_collectives(text: str) -> list[tuple[str, str]]:
    """``(op, op_name)`` of each collective the compiled HLO ``text`` runs inside a while loop's
    body of the cross-entropy kernel (its named scope in the op's metadata)."""
    found = []
    for line in text.splitlines():
        op = re.search(r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)"
                       r"(?:-start)?\(", line)  # fmt: skip
        name = re.search(r'op_name="([^"]*)"', line)
        if op and name and "cross_entropy.fused_xla" in name[1] and "/while/body/" in name[1]:
            found.append((op[1], name[1]))
    return found


@pytest.mark.parametrize("shape", [(1, 8, 1), (1, 4, 2)], ids=str)
def test_head_gradient_is_reduced_once_not_per_tile(shape, batch, monkeypatch):
    # 512 tokens in tiles of 64 tokens: 8 steps of the loop. The head gradient (its rows over
    # fsdp) is summed over the token-sharding axes once after the loop; inside it only a
    # vocabulary split over tensor combines each tile's log normaliser (one small gather).
    with monkeypatch.context() as m:
        m.setenv(ENV_VAR, "fused_xla")
        m.setenv(TILE_ENV, "64")
        state, step = state_and_step(CONFIGS["untied"], _mesh(*shape))
        text = step.lower(batch, state).compile().as_text()
    ops = sorted(op for op, _ in _loop_collectives(text))
    assert ops == ([] if shape[2] == 1 else ["all-gather"]), _loop_collectives(text)
