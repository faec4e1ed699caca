"""DeepSeek-V3's auxiliary-loss-free balancing in training: the routers' correction biases
hold no optimizer state and neither a gradient nor weight decay moves them; after each
optimizer step each moves by the update speed towards an even load of that step's tokens
(``bias_e += speed * sign(mean load - load_e)``, counted independently here from the model
before the step), as DeepSeek-V3 updates its ``e_score_correction_bias``; with the speed at 0,
or in a LoRA run (whose adapters must carry every change), they stay as loaded."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import zoo_models
import zoo_train
from zoo_train.peft import LoRAConfig, apply_lora, lora_filter

SPEED = 0.01


def _model(speed: float = SPEED) -> zoo_models.Transformer:
    config = zoo_models.get("deepseek-v3-tiny").replace(
        compute_dtype="float32", init_std=0.2, attention_implementation="xla",
        router_bias_update_speed=speed,
    )  # fmt: skip
    return zoo_models.build(config, key=jax.random.key(0))


def _batch(config: zoo_models.ModelConfig) -> dict[str, jax.Array]:
    ids = np.random.default_rng(1).integers(0, config.vocab_size, (4, 24))
    return {
        "input_ids": jnp.asarray(ids, jnp.int32),
        "targets": jnp.asarray(np.roll(ids, -1, axis=1), jnp.int32),
        "positions": jnp.broadcast_to(jnp.arange(24, dtype=jnp.int32), (4, 24)),
        "segment_ids": jnp.ones((4, 24), jnp.int32),
        "loss_mask": jnp.ones((4, 24), jnp.float32),
    }


def _biases(model: zoo_models.Transformer) -> np.ndarray:
    c = model.config
    return np.stack([np.asarray(model.stack.layer(i).mlp.correction_bias) for i in c.moe_layers])


def _step(model, trainable=None, *, grad_accum: int = 1):
    optimizer = optax.adamw(1e-2, weight_decay=0.5)
    state = zoo_train.init_train_state(model, optimizer, trainable=trainable)
    step = zoo_train.make_train_step(
        optimizer, zoo_train.make_lm_loss(balance_routers=trainable is None),
        optax.constant_schedule(1e-2), grad_accum=grad_accum,
    )  # fmt: skip
    return state, step


@pytest.mark.parametrize(
    "grad_accum",
    # [2] sums the counts over micro-batches and updates once, the path of one micro-batch too
    [pytest.param(1, marks=pytest.mark.full), 2],
)
def test_a_step_moves_each_correction_bias_by_the_load_of_its_tokens(grad_accum):
    model = _model()
    batch = _batch(model.config)
    before = _biases(model)
    _, stats = model.logits_and_router(
        batch["input_ids"], positions=batch["positions"], segment_ids=batch["segment_ids"]
    )
    counts = np.asarray(stats.counts)  # [moe layers, E], the step's assignments
    assert counts.sum(-1).tolist() == [4 * 24 * model.config.experts_per_token] * len(counts)
    assert np.ptp(counts, axis=-1).min() > 0  # some expert is busier than another
    state, step = _step(model, grad_accum=grad_accum)
    assert state.params.stack.layer(1).mlp.correction_bias is None  # no optimizer state
    new_state, metrics = step(batch, state)
    assert "router_counts" not in metrics and bool(metrics["finite"])
    want = before + SPEED * np.sign(counts.mean(-1, keepdims=True) - counts)
    np.testing.assert_allclose(_biases(new_state.model), want, rtol=0, atol=1e-7)
    # The router itself trains (and weight decay acts on it).
    router = lambda m: np.asarray(m.stack.layer(1).mlp.router.weight)
    assert not np.allclose(router(new_state.model), router(model))


def test_no_speed_or_a_lora_run_leaves_the_biases_as_loaded():
    for model, lora in ((_model(0.0), False), (_model(), True)):
        batch = _batch(model.config)
        trainable = None
        if lora:
            model = apply_lora(
                model, LoRAConfig(rank=2, targets=("q_a", "kv_b")), key=jax.random.key(1)
            )
            trainable = lora_filter(model)
        state, step = _step(model, trainable)
        new_state, _ = step(batch, state)
        np.testing.assert_array_equal(_biases(new_state.model), _biases(model))
