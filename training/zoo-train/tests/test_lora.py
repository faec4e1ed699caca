"""LoRA: only adapters train and are saved; merging equals W + (alpha/r)·B·A (numpy float64)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file
from tiny_lm import random_docs

import zoo_models
import zoo_train
from zoo_train.data import PackedLoader

TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


def _is_lora(x: object) -> bool:
    return isinstance(x, zoo_train.LoRALinear)


def _strip(model):
    """The base model under the adapters (adapters dropped, not merged)."""
    return jax.tree.map(lambda x: x.base if _is_lora(x) else x, model, is_leaf=_is_lora)


@eqx.filter_jit
def _forward(model, ids):
    return model(ids)


def _arrays(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(eqx.filter(tree, eqx.is_array))]


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    config = zoo_models.get("llama-tiny").replace(attention_implementation="xla")
    base = zoo_models.build(config, key=jax.random.key(3))
    lora = zoo_train.LoRAConfig(rank=4, alpha=8.0, targets=TARGETS)
    data = PackedLoader(random_docs(5, n=60, vocab=256), seq_len=16, seed=0, pad_id=255)
    train_config = zoo_train.TrainConfig(
        steps=6,
        batch_size=4,
        optimizer=zoo_train.OptimizerConfig(lr=1e-2, warmup_steps=0),
        checkpoint_every=6,
        eval_every=0,
        progress=False,
        plot=False,
    )
    out = tmp_path_factory.mktemp("lora")
    key = jax.random.key(11)
    result = zoo_train.finetune(
        base, data, config=train_config, out=out, lora=lora, key=key, run_info={"model_config": {}}
    )
    initial = zoo_train.apply_lora(base, lora, key=key)
    return base, initial, result, lora, out


def test_only_adapters_change(lora_run):
    base, initial, result, _, _ = lora_run
    trained = result.model
    # The base under the adapters is bitwise the original model.
    for got, want in zip(_arrays(_strip(trained)), _arrays(base), strict=True):
        np.testing.assert_array_equal(got, want)
    adapters = [x for x in jax.tree.leaves(trained, is_leaf=_is_lora) if _is_lora(x)]
    starts = [x for x in jax.tree.leaves(initial, is_leaf=_is_lora) if _is_lora(x)]
    assert len(adapters) == len(TARGETS)
    for new, old in zip(adapters, starts, strict=True):
        assert np.all(np.asarray(old.lora_b) == 0)  # B starts at zero
        assert np.abs(np.asarray(new.lora_b)).max() > 0
        assert not np.array_equal(np.asarray(new.lora_a), np.asarray(old.lora_a))


def test_optimizer_state_holds_only_adapters(lora_run):
    _, initial, result, _, _ = lora_run
    spec = zoo_train.lora_filter(initial)
    n_adapter = zoo_train.count_params(initial, spec)
    assert 0 < n_adapter < zoo_train.count_params(initial) // 10
    assert zoo_train.count_params(result.state.params) == n_adapter
    adapter_shapes = sorted(x.shape for x in jax.tree.leaves(eqx.filter(initial, spec)))
    big = sorted(x.shape for x in jax.tree.leaves(result.state.opt_state) if np.ndim(x) > 0)
    # AdamW: one first and one second moment per adapter array, nothing else of any size.
    assert big == sorted(adapter_shapes * 2)


def test_merge_matches_numpy(lora_run):
    _, _, result, lora, _ = lora_run
    trained = result.model
    merged = zoo_train.merge_lora(trained)
    assert not any(_is_lora(x) for x in jax.tree.leaves(merged, is_leaf=_is_lora))
    # Independent merge in float64 numpy: W + (alpha / r) · B @ A per (stacked) layer.
    expected = jax.tree.map(
        lambda x: (
            np.asarray(x.base.weight, np.float64)
            + (lora.alpha / lora.rank)
            * np.einsum(
                "...or,...ri->...oi",
                np.asarray(x.lora_b, np.float64),
                np.asarray(x.lora_a, np.float64),
            )
            if _is_lora(x)
            else None
        ),
        trained,
        is_leaf=_is_lora,
    )
    reference_model = jax.tree.map(
        lambda x, e: (
            eqx.tree_at(lambda m: m.weight, x.base, jnp.asarray(e, jnp.float32))
            if _is_lora(x)
            else x
        ),
        trained,
        expected,
        is_leaf=_is_lora,
    )
    for got, want in zip(_arrays(merged), _arrays(reference_model), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    ids = jax.random.randint(jax.random.key(7), (2, 24), 0, 256)
    with_adapters = np.asarray(_forward(trained, ids))
    np.testing.assert_allclose(
        np.asarray(_forward(merged, ids)), with_adapters, rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(
        np.asarray(_forward(reference_model, ids)), with_adapters, rtol=1e-4, atol=1e-5
    )
    # The adapters did change the function.
    assert np.abs(np.asarray(_forward(_strip(trained), ids)) - with_adapters).max() > 1e-3


def test_saved_adapters_hold_only_adapters_and_reload(lora_run):
    _, initial, result, _, out = lora_run
    saved = load_file(str(out / "adapter" / zoo_train.ADAPTER_FILE))
    assert saved and all(k.endswith((".lora_A.weight", ".lora_B.weight")) for k in saved)
    n_saved = sum(v.size for v in saved.values())
    assert n_saved == zoo_train.count_params(initial, zoo_train.lora_filter(initial))
    reloaded = zoo_train.load_adapters(initial, out / "adapter")
    ids = jax.random.randint(jax.random.key(8), (1, 20), 0, 256)
    np.testing.assert_array_equal(
        np.asarray(_forward(reloaded, ids)), np.asarray(_forward(result.model, ids))
    )


def test_lora_config_rejects_bad_values():
    with pytest.raises(ValueError, match="rank"):
        zoo_train.LoRAConfig(rank=0)
    with pytest.raises(ValueError, match="target"):
        zoo_train.LoRAConfig(targets=("qq",))


def test_peft_names_follow_each_layer_of_the_checkpoint():
    # Each PEFT tensor must sit on the layer it adapts, also when layers are stacked by a scan
    # period (Gemma 2: blocks.0 holds layers 0 and 2): merged weight - base = scale · B A.
    from zoo_train.peft import PREFIX, peft_tensors

    shape = {"vocab_size": 32, "d_model": 16, "n_layers": 4, "n_heads": 2, "mlp_hidden": 24}
    gemma = {"post_norms": True, "window_pattern": (True, False), "sliding_window": 4}
    config = zoo_models.ModelConfig(family="gemma2", **shape, **gemma)
    base = zoo_models.build(config, key=jax.random.key(0))
    lora = zoo_train.LoRAConfig(rank=2, alpha=4.0, targets=("q", "gate"))
    adapted = zoo_train.apply_lora(base, lora, key=jax.random.key(1))
    adapted = jax.tree.map(  # B non-zero and different in every layer
        lambda x: (
            eqx.tree_at(
                lambda m: m.lora_b,
                x,
                jax.random.normal(jax.random.key(x.lora_b.size), x.lora_b.shape),
            )
            if _is_lora(x)
            else x
        ),
        adapted,
        is_leaf=_is_lora,
    )
    before = zoo_models.hf_state_dict(base)
    after = zoo_models.hf_state_dict(zoo_train.merge_lora(adapted))
    tensors = peft_tensors(adapted)
    modules = {k[len(PREFIX) :].rsplit(".", 2)[0] for k in tensors}
    assert len(modules) == 2 * config.n_layers
    for module in modules:
        a = tensors[f"{PREFIX}{module}.lora_A.weight"].astype(np.float64)
        b = tensors[f"{PREFIX}{module}.lora_B.weight"].astype(np.float64)
        name = f"{module}.weight"
        np.testing.assert_allclose(
            after[name] - before[name], lora.scale * b @ a, rtol=1e-4, atol=1e-5, err_msg=name
        )
