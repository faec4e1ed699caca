"""GPT-2's LoRA adapters as PEFT adapters: its Conv1D projections (attention output, MLP) load
with peft and compute what zoo computes; its fused q/k/v are refused before any training."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import zoo_models
import zoo_train
from zoo_train.data import PackedLoader
from zoo_train.peft import read_peft_config


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    directory = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=32)
    GPT2LMHeadModel(config).save_pretrained(directory)
    return directory


def _base(directory) -> GPT2LMHeadModel:
    return GPT2LMHeadModel.from_pretrained(directory, dtype=torch.float32).eval()


def _logits(model, ids) -> np.ndarray:
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            return model(torch.as_tensor(ids)).logits.numpy()
    return np.asarray(eqx.filter_jit(lambda m, x: m(x))(model, ids))


def _randomized(model):
    """Adapters with B non-zero (a fresh B is zero, which would hide any naming mistake)."""

    def fill(x):
        if not isinstance(x, zoo_train.LoRALinear):
            return x
        b = jax.random.normal(jax.random.key(x.lora_b.size), x.lora_b.shape) * 0.3
        return eqx.tree_at(lambda m: m.lora_b, x, b)

    return jax.tree.map(fill, model, is_leaf=lambda x: isinstance(x, zoo_train.LoRALinear))


@pytest.mark.parametrize(
    ("targets", "modules"),
    [(("o", "up"), ["attn.c_proj", "c_fc"]), (("o", "up", "down"), ["c_fc", "c_proj"])],
)
def test_conv1d_adapters_load_in_peft(gpt2, tmp_path, targets, modules):
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    model = zoo_models.load_hf(gpt2)
    lora = zoo_train.LoRAConfig(rank=2, alpha=6.0, targets=targets)
    adapted = _randomized(zoo_train.apply_lora(model, lora, key=jax.random.key(1)))
    zoo_train.save_adapters(adapted, tmp_path / "adapter", lora)
    meta = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    # "c_proj" alone would also adapt the module left out (the MLP's c_proj for o + up).
    assert meta["target_modules"] == modules and meta["fan_in_fan_out"] is True
    peft_model = PeftModel.from_pretrained(_base(gpt2), tmp_path / "adapter").eval()
    adapted_modules = {n for n, m in peft_model.named_modules() if isinstance(m, LoraLayer)}
    assert len(adapted_modules) == len(targets) * 2  # every layer, nothing else
    ids = np.random.default_rng().integers(0, 96, (2, 20))
    ours = _logits(adapted, ids)
    assert np.abs(ours - _logits(model, ids)).max() > 1e-2  # the adapters change the function
    np.testing.assert_allclose(_logits(peft_model, ids), ours, rtol=0, atol=2e-5)
    merged = peft_model.merge_and_unload()
    np.testing.assert_allclose(_logits(merged, ids), ours, rtol=0, atol=2e-5)


def test_a_peft_gpt2_adapter_is_read_back(gpt2, tmp_path):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)
    config = LoraConfig(
        r=4, lora_alpha=8, target_modules=["c_proj", "c_fc"], init_lora_weights=False
    )
    peft_model = get_peft_model(_base(gpt2), config).eval()
    peft_model.save_pretrained(tmp_path / "peft")
    lora = read_peft_config(tmp_path / "peft")
    assert sorted(lora.targets) == ["down", "o", "up"] and lora.rank == 4
    model = zoo_train.apply_lora(zoo_models.load_hf(gpt2), lora, key=jax.random.key(0))
    model = zoo_train.load_adapters(model, tmp_path / "peft")
    ids = np.random.default_rng().integers(0, 96, (2, 20))
    np.testing.assert_allclose(_logits(model, ids), _logits(peft_model, ids), rtol=0, atol=2e-5)


def test_fused_qkv_targets_are_refused_before_training(gpt2, tmp_path):
    data = PackedLoader([np.arange(90) % 96] * 4, seq_len=16, seed=0)
    config = zoo_train.TrainConfig(steps=2, batch_size=2, progress=False, plot=False)
    lora = zoo_train.LoRAConfig(rank=2, targets=("q", "v"))
    with pytest.raises(ValueError, match="choose --lora-targets among o up down"):
        zoo_train.finetune(
            zoo_models.load_hf(gpt2), data, config=config, out=tmp_path / "run", lora=lora
        )
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_finetune_without_targets_adapts_gpt2s_default(tmp_path):
    """No --lora-targets: GPT-2 gets its own default (o up down), not q k v o it cannot save."""
    from zoo_train.cli import main
    from zoo_train.testing import tiny_tokenizer, write_corpus

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=256, n_embd=32, n_layer=2, n_head=4, n_positions=64)
    GPT2LMHeadModel(config).save_pretrained(tmp_path / "hf")
    tiny_tokenizer(tmp_path / "hf")
    write_corpus(tmp_path / "corpus", files=2, lines=10)
    code = main([
        "finetune", "--from-hf", str(tmp_path / "hf"), "--data", str(tmp_path / "corpus"),
        "--out", str(tmp_path / "run"), "--steps", "1", "--batch-size", "2", "--seq-len", "16",
        "--lora-rank", "2", "--eval-every", "0", "--no-progress", "--set", "val_fraction=0",
    ])  # fmt: skip
    assert code == 0
    meta = json.loads((tmp_path / "run" / "adapter" / "adapter_config.json").read_text())
    assert meta["target_modules"] == ["c_fc", "c_proj"]  # o, up and down: every Conv1D
    targets = read_peft_config(tmp_path / "run" / "adapter").targets
    assert sorted(targets) == sorted(zoo_models.default_lora_targets("gpt2"))
