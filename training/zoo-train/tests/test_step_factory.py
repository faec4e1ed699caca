"""One step factory: the step ``zoo train`` and ``zoo finetune`` take and the one ``zoo
compile`` compiles are built by ``build_program`` from one ``StepSpec``; here, what it plans and
traces on the host's one CPU device, against counts made from the model's shapes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_models
from zoo_train import TrainConfig
from zoo_train.aot import optimizer_state_bytes
from zoo_train.peft import LoRAConfig
from zoo_train.preference import PreferenceConfig, PreferenceLoss
from zoo_train.program import abstract_batch, batch_fields, build_program
from zoo_train.recipes import finetune_step

CONFIG = zoo_models.get("llama-tiny")
# AdamW's step counts and the schedule's: a few int32 scalars besides the moments.
SCALARS = 64


def _build() -> object:
    return zoo_models.build(CONFIG, key=jax.random.key(0))


def _projection_sizes(config: zoo_models.ModelConfig) -> dict[str, tuple[int, int]]:
    """``(in, out)`` of each attention projection of a layer."""
    d, q = config.d_model, config.n_heads * config.dim_per_head
    kv = config.kv_heads * config.dim_per_head
    return {"q": (d, q), "k": (d, kv), "v": (d, kv), "o": (q, d)}


@pytest.mark.parametrize("draw", range(3))
def test_a_lora_step_plans_optimizer_state_for_the_adapters_alone(draw: int):
    rng = np.random.default_rng()
    rank = int(rng.choice([1, 2, 4, 8, 16]))
    targets = tuple(t for t in "qkvo" if rng.random() < 0.5) or ("q",)
    lora = LoRAConfig(rank=rank, alpha=float(rng.uniform(1, 32)), targets=targets)
    config = TrainConfig(steps=10, batch_size=1)
    sizes = _projection_sizes(CONFIG)
    adapters = CONFIG.n_layers * sum(rank * sum(sizes[t]) for t in targets)

    planned = optimizer_state_bytes(finetune_step(_build, config, lora=lora))
    assert 2 * 4 * adapters <= planned <= 2 * 4 * adapters + SCALARS  # two float32 moments
    full = optimizer_state_bytes(finetune_step(_build, config))
    every = zoo_models.num_params(CONFIG)
    assert 2 * 4 * every <= full <= 2 * 4 * every + SCALARS


def test_a_preference_step_reads_the_reference_its_loss_declares():
    """With reference log-probabilities computed before training, the batch carries them
    (``ref_logps [B, T]`` float32) and the step traces on it; with the adapters as the
    reference, it does not."""
    dpo = PreferenceConfig("dpo", 0.1, 0.5)
    from_batch = PreferenceLoss(dpo, reference="batch", compute_dtype="float32")
    from_adapters = PreferenceLoss(dpo, reference="adapters", compute_dtype="float32")
    assert batch_fields(from_batch)["ref_logps"] == np.float32
    assert "ref_logps" not in batch_fields(from_adapters)
    assert set(batch_fields(None)) == set(batch_fields(from_adapters))

    rows, seq_len = 2, 16
    spec = finetune_step(_build, TrainConfig(steps=4, batch_size=rows), loss_fn=from_batch)
    program = build_program(spec)
    batch = abstract_batch(rows, seq_len, program.mesh, program.rules, program.loss_fn)
    assert batch["ref_logps"].shape == (rows, seq_len)
    program.train_step.lower(batch, program.plan.template)  # traces: the loss found its input
    without = {k: v for k, v in batch.items() if k != "ref_logps"}
    with pytest.raises(KeyError, match="ref_logps"):
        program.train_step.lower(without, program.plan.template)


def test_the_program_plans_the_state_the_step_takes():
    """The template the loop restores into and the compiled step lowers with: the model's
    arrays in float32, as a fresh state has them."""
    program = build_program(finetune_step(_build, TrainConfig(steps=2, batch_size=1)))
    fresh = _build()
    planned = jax.tree.leaves(program.plan.template.model)
    built = [x for x in jax.tree.leaves(fresh) if isinstance(x, jax.Array)]
    assert [x.shape for x in planned] == [x.shape for x in built]
    assert all(x.dtype == jnp.float32 for x in planned)
