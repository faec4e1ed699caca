"""A Hugging Face Mixtral fine-tuned with LoRA on a mesh with an expert axis (8 devices, experts
split 4 ways): the losses of the one-device run, and an adapter that ``peft`` loads onto the
checkpoint to give the merged export's logits."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import zoo_train
from zoo_train.cli import main
from zoo_train.testing import TINY_HF_SHAPE, tiny_tokenizer, write_corpus

STEPS = 3


def _mixtral(path: pathlib.Path) -> pathlib.Path:
    """A random Mixtral of 4 experts, every weight perturbed, with the load-balancing loss on."""
    import torch
    import transformers

    torch.manual_seed(3)
    config = transformers.MixtralConfig(
        **TINY_HF_SHAPE, num_local_experts=4, num_experts_per_tok=2, output_router_logits=True
    )
    model = transformers.MixtralForCausalLM._from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    model.save_pretrained(path)
    tiny_tokenizer(path)
    return path


def _args(root: pathlib.Path, out: str) -> list[str]:
    return ["finetune", "--from-hf", str(root / "hf"), "--data", str(root / "corpus"),
            "--out", str(root / out), "--steps", str(STEPS), "--batch-size", "8",
            "--seq-len", "32", "--lora-rank", "4", "--lr", "1e-2", "--log-every", "1",
            "--eval-every", "0", "--sample-tokens", "0", "--no-progress", "--seed", "2"]  # fmt: skip


def _losses(run: pathlib.Path) -> dict[int, float]:
    records = zoo_train.read_metrics(run / zoo_train.METRICS_FILE)
    return {r["step"]: r["loss"] for r in records if isinstance(r.get("loss"), float)}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory, one_device_zoo) -> pathlib.Path:
    root = tmp_path_factory.mktemp("moe-lora-mesh")
    _mixtral(root / "hf")
    write_corpus(root / "corpus")
    mesh = ["--mesh", "fsdp=2,expert=4", "--export-hf", str(root / "export")]
    assert main([*_args(root, "eight"), *mesh]) == 0
    proc = one_device_zoo(*_args(root, "one"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


def test_lora_on_an_expert_mesh_matches_one_device(root):
    eight, one = _losses(root / "eight"), _losses(root / "one")
    assert sorted(eight) == sorted(one) == list(range(1, STEPS + 1))
    np.testing.assert_allclose([eight[s] for s in eight], [one[s] for s in eight], rtol=1e-4)
    records = zoo_train.read_metrics(root / "eight" / zoo_train.METRICS_FILE)
    start = next(r for r in records if r.get("event") == "start")
    assert start["mesh"]["axes"]["expert"] == 4


def test_the_adapter_loads_in_peft_and_merged_is_the_export(root):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(root / "hf", dtype=torch.float32).eval()
    export = AutoModelForCausalLM.from_pretrained(root / "export", dtype=torch.float32).eval()
    ids = torch.as_tensor(np.random.default_rng().integers(3, 256, (2, 16)))
    with torch.no_grad():
        before, want = base(ids).logits.numpy(), export(ids).logits.numpy()
        got = PeftModel.from_pretrained(base, root / "eight" / "adapter").eval()(ids).logits
    # float32 rounding of x W + x A B against x (W + A B) through every layer: the error follows
    # the activations' size, not the logit's (2.6e-5 seen at a logit of -0.5), so the bound is
    # absolute, the one the check below needs the adapters to have moved the logits by.
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-4)
    assert not np.allclose(want, before, atol=1e-4)  # the adapters learned something
