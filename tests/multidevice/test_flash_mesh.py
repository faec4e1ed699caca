"""flash_tpu inside a full model on a mesh of 8 devices: the contract runs it under shard_map
(generic Pallas interpret mode on CPU: TPU interpret mode deadlocks on several devices), with
segment ids, a local window and a logits soft cap, and the gradients match one-device ``xla``."""

from __future__ import annotations

import equinox as eqx
import jax
import numpy as np
import pytest

import zoo_attention
import zoo_models
import zoo_train
from zoo_train import parallel
from zoo_train.data import PackedLoader

# Gemma 2: alternating sliding-window and global layers, attention logit soft cap, GQA.
CONFIG = zoo_models.get("gemma2-tiny").replace(
    vocab_size=64, bos_token_id=None, eos_token_id=None, pad_token_id=None, sliding_window=24
)


def _loss_and_grads(model, batch, mesh, rules):
    params, static = eqx.partition(model, eqx.is_inexact_array)
    loss = zoo_train.make_lm_loss()

    def mean_loss(p, b):
        total, aux = loss(eqx.combine(p, static), b, jax.random.key(0))
        return total / aux["weight"]

    fn = parallel.MeshFunction(jax.value_and_grad(mean_loss), mesh=mesh, rules=rules)
    text = fn.lower(params, batch).as_text() if mesh is not None else ""
    value, grads = fn(params, batch)
    return float(value), jax.device_get(grads), text


def test_flash_under_a_mesh_matches_one_device_xla(monkeypatch: pytest.MonkeyPatch):
    model = zoo_models.build(CONFIG, key=jax.random.key(0))
    rng = np.random.default_rng()
    docs = [rng.integers(0, 63, rng.integers(5, 60)).astype(np.int32) for _ in range(60)]
    batch = PackedLoader(docs, seq_len=128, seed=int(rng.integers(1 << 30))).next_batch(8)
    assert len(np.unique(batch["segment_ids"][0])) > 1  # packed documents: segment ids matter

    monkeypatch.setenv(zoo_attention.ENV_VAR, "xla")
    want_loss, want_grads, _ = _loss_and_grads(model, batch, None, None)

    monkeypatch.setenv(zoo_attention.ENV_VAR, "flash_tpu")
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    flash = type(zoo_attention.get_kernel("flash_tpu"))
    seen = []

    def recording(self, q, k, v, ids, spec, call=flash.__call__):
        seen.append((q.shape, spec.batch, spec.num_heads, spec.num_kv_heads))
        return call(self, q, k, v, ids, spec)

    monkeypatch.setattr(flash, "__call__", recording)
    mesh = parallel.make_mesh(parallel.MeshConfig(data=2, fsdp=2, tensor=2))
    with zoo_attention.recording() as log:
        loss, grads, text = _loss_and_grads(model, batch, mesh, parallel.make_rules())

    served = {r.kernel for r in log}
    assert served == {"flash_tpu"}
    # Per shard: rows over data x fsdp (8 / 4), heads over tensor (4 / 2, kv 2 / 2).
    assert "sdy.manual_computation" in text
    assert seen and {s[1:] for s in seen} == {(2, CONFIG.n_heads // 2, CONFIG.kv_heads // 2)}
    assert {s[0][:1] for s in seen} == {(2,)}
    np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True):
        assert np.max(np.abs(got - want)) <= 1e-4 * np.max(np.abs(want)) + 1e-7
