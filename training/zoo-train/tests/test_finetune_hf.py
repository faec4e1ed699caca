"""Fine-tuning from a Hugging Face directory (full and LoRA), export and conversion, checked
against the Hugging Face implementation (transformers)."""

from __future__ import annotations

import json

import equinox as eqx
import numpy as np
import pytest
from safetensors.numpy import load_file

import zoo_train
from zoo_train.cli import main
from zoo_train.testing import hf_logits, run_zoo, tiny_hf_llama, write_corpus


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("ft")
    tiny_hf_llama(root / "hf")
    write_corpus(root / "corpus", files=40, lines=10)  # enough files to hold out by hash
    return root


def _ids(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (2, 20))


@eqx.filter_jit
def _forward(model, ids):
    return model(ids)


def test_full_finetune_from_hf_subprocess(workspace):
    root = workspace
    proc = run_zoo(
        "finetune", "--from-hf", "hf", "--data", "corpus", "--out", "full", "--steps", "12",
        "--lr", "3e-3", "--batch-size", "4", "--seq-len", "32", "--log-every", "3",
        "--eval-every", "0", "--no-progress", "--export-hf", "exported",
        cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    losses = [
        r["loss"] for r in zoo_train.read_metrics(root / "full" / "metrics.jsonl") if "loss" in r
    ]
    assert len(losses) == 4 and losses[-1] < losses[0] - 0.2
    evals = [r for r in zoo_train.read_metrics(root / "full" / "metrics.jsonl") if "eval_loss" in r]
    assert evals  # evaluated at the end on the held-out documents
    # The export loads in transformers and computes what the fine-tuned zoo model computes.
    ids = _ids(0)
    loaded = zoo_train.load_run(root / "full")
    np.testing.assert_allclose(
        hf_logits(root / "exported", ids),
        np.asarray(_forward(loaded.model, ids)),
        rtol=1e-4,
        atol=1e-4,
    )
    # ...and differs from the model it started from.
    assert np.abs(hf_logits(root / "exported", ids) - hf_logits(root / "hf", ids)).max() > 1e-2


def test_lora_finetune_from_hf_exports_merged_model(workspace, capsys):
    root = workspace
    code = main([
        "finetune", "--from-hf", str(root / "hf"), "--data", str(root / "corpus"),
        "--out", str(root / "lora"), "--steps", "6", "--lr", "1e-2", "--batch-size", "4",
        "--seq-len", "32", "--eval-every", "0", "--no-progress", "--lora-rank", "4",
        "--lora-alpha", "8", "--lora-targets", "q", "v", "up", "--export-hf", str(root / "lora_hf"),
    ])  # fmt: skip
    assert code == 0
    # Only the adapters are saved (PEFT's names), for exactly the targeted projections.
    saved = load_file(str(root / "lora" / "adapter" / zoo_train.ADAPTER_FILE))
    assert sorted({k.rsplit(".", 3)[-3] for k in saved}) == ["q_proj", "up_proj", "v_proj"]
    assert all(k.endswith((".lora_A.weight", ".lora_B.weight")) for k in saved)
    meta = json.loads((root / "lora" / "adapter" / zoo_train.ADAPTER_CONFIG).read_text())
    assert (meta["peft_type"], meta["r"], meta["lora_alpha"]) == ("LORA", 4, 8.0)
    assert meta["target_modules"] == ["q_proj", "up_proj", "v_proj"]
    # The merged export matches the LoRA model in transformers; untargeted weights are untouched.
    run = zoo_train.load_run(root / "lora")
    assert run.lora is not None
    ids = _ids(1)
    np.testing.assert_allclose(
        hf_logits(root / "lora_hf", ids), np.asarray(_forward(run.model, ids)), rtol=1e-4, atol=1e-4
    )
    before = load_file(str(root / "hf" / "model.safetensors"))
    after = load_file(str(root / "lora_hf" / "model.safetensors"))
    for name, array in before.items():
        targeted = any(t in name for t in ("q_proj", "v_proj", "up_proj"))
        if targeted:
            assert not np.array_equal(after[name], array), name
        else:
            np.testing.assert_array_equal(after[name], array, err_msg=name)


def test_convert_round_trip_and_generate(workspace, capsys):
    root = workspace
    assert main(["convert", str(root / "hf"), str(root / "as_zoo")]) == 0
    assert main(["convert", str(root / "as_zoo"), str(root / "back_hf")]) == 0
    before = load_file(str(root / "hf" / "model.safetensors"))
    after = load_file(str(root / "back_hf" / "model.safetensors"))
    assert sorted(after) == sorted(before)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    capsys.readouterr()
    assert (
        main(
            [
                "generate",
                str(root / "as_zoo"),
                "--max-new-tokens",
                "8",
                "--greedy",
                "--prompt",
                "ab",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("ab")
    # Converting onto a non-empty destination is refused.
    assert main(["convert", str(root / "hf"), str(root / "as_zoo")]) == 2


def _snapshot(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_exports_never_clobber_and_replace_whole(workspace, tmp_path, capsys):
    root = workspace
    source = _snapshot(root / "hf")
    common = ["--data", str(root / "corpus"), "--steps", "1", "--out", str(tmp_path / "ft")]
    # Into the source model: refused before any training, the source untouched.
    assert main(["finetune", "--from-hf", str(root / "hf"), *common,
                 "--export-hf", str(root / "hf")]) == 2  # fmt: skip
    assert "is the model being read" in capsys.readouterr().err
    assert _snapshot(root / "hf") == source and not (tmp_path / "ft").exists()
    # Into a directory holding another model: refused, unless --overwrite.
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "gpt2", "seed": str(tmp_path)}))
    assert main(["convert", str(root / "hf"), str(other)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert json.loads((other / "config.json").read_text())["seed"] == str(tmp_path)
    assert main(["convert", str(root / "hf"), str(other), "--overwrite"]) == 0
    assert not (other / "config.json").exists() and (other / "checkpoints").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other"]  # no temporary siblings


def test_a_failed_export_leaves_the_old_directory(tmp_path):
    from zoo_train._export_directory import atomic_directory

    dest = tmp_path / "export"
    dest.mkdir()
    (dest / "model.safetensors").write_bytes(b"old")

    def killed_midway():
        with atomic_directory(dest) as target:
            (target / "model.safetensors").write_bytes(b"half")
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        killed_midway()
    assert (dest / "model.safetensors").read_bytes() == b"old"
    with atomic_directory(dest) as target:
        (target / "model.safetensors").write_bytes(b"new")
        assert (dest / "model.safetensors").read_bytes() == b"old"  # until the block ends
    assert (dest / "model.safetensors").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
