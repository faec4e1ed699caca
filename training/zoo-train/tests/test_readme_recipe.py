"""The README's "Write your own recipe", run as written: at most 60 lines on the public API; its
focal loss equals a float64 numpy computation from the model's logits; its run's loss falls; and
its hook's records sit at the steps it asked for, the last one the norm of the trained weights."""

from __future__ import annotations

import json
import pathlib
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _recipe() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Write your own recipe") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, pathlib.Path]:
    where = tmp_path_factory.mktemp("recipe")
    namespace: dict = {"__name__": "readme_recipe"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(where)
        exec(compile(_recipe(), str(README), "exec"), namespace)
    return namespace, where / "runs" / "focal"


def test_the_recipe_fits_in_60_lines():
    assert len(_recipe().strip().splitlines()) <= 60


def _log_softmax64(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    top = x.max(-1, keepdims=True)
    return x - top - np.log(np.exp(x - top).sum(-1, keepdims=True))


def test_the_focal_loss_is_numpys(ran):
    namespace, _ = ran
    import zoo_models

    config = namespace["config"]
    model = zoo_models.build(config, key=jax.random.key(1))
    rng = np.random.default_rng(0)
    b, t = 2, 12
    ids = rng.integers(0, config.vocab_size, (b, t + 1))
    mask = (rng.random((b, t)) < 0.7).astype(np.float32)
    batch = {
        "input_ids": jnp.asarray(ids[:, :-1], jnp.int32),
        "targets": jnp.asarray(ids[:, 1:], jnp.int32),
        "positions": jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t)),
        "segment_ids": jnp.ones((b, t), jnp.int32),
        "loss_mask": jnp.asarray(mask),
    }
    gamma = 2.0
    total, aux = namespace["focal_loss"](gamma)(model, batch, jax.random.key(0))
    logits = np.asarray(model(batch["input_ids"], positions=batch["positions"],
                              segment_ids=batch["segment_ids"]))  # fmt: skip
    ce = -np.take_along_axis(_log_softmax64(logits), ids[:, 1:, None], -1)[..., 0]
    want = np.sum((1 - np.exp(-ce)) ** gamma * ce * mask)
    np.testing.assert_allclose(float(total), want, rtol=2e-5)
    np.testing.assert_allclose(float(aux["ce"]), np.sum(ce * mask), rtol=2e-5)
    assert float(aux["weight"]) == mask.sum()


def test_the_run_learns_and_the_hook_records_where_asked(ran):
    namespace, out = ran
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [(r["step"], r["loss"]) for r in records if "loss" in r]
    assert [s for s, _ in losses] == [5, 10, 15, 20]
    assert losses[-1][1] < losses[0][1], losses
    norms = [(r["step"], r["weight_norm"]) for r in records if "weight_norm" in r]
    assert [s for s, _ in norms] == [10, 20]
    weights = jax.tree.leaves(eqx.filter(namespace["result"].model, eqx.is_inexact_array))
    want = np.sqrt(sum(np.sum(np.square(np.asarray(w, np.float64))) for w in weights))
    np.testing.assert_allclose(norms[-1][1], want, rtol=1e-5)
    assert namespace["result"].step == 20
