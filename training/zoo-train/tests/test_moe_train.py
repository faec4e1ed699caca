"""Mixtures of experts in training: the routers' losses in the training loss against
``transformers`` (which adds ``router_aux_loss_coef x aux_loss`` when ``output_router_logits`` is
on) and float64 numpy (z-loss, expert loads); ``zoo train --model mixtral-tiny`` with the balance
in its records and progress line, then ``zoo finetune`` (LoRA on attention, a PEFT adapter),
``zoo generate`` and ``zoo eval`` of that run; bad expert checkpoints as one-sentence refusals."""

from __future__ import annotations

import json
import shutil

import equinox as eqx
import jax
import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file, save_file

import zoo_models
import zoo_train
from zoo_attention import grouped
from zoo_train.cli import main
from zoo_train.peft import ADAPTER_CONFIG
from zoo_train.testing import TINY_HF_SHAPE, tiny_tokenizer, write_corpus

COEF, E, K = 0.02, 4, 2


@pytest.fixture(scope="module")
def hf_mixtral(tmp_path_factory):
    """A random Mixtral (every weight perturbed) with the load-balancing loss on, and its zoo
    model."""
    path = tmp_path_factory.mktemp("mixtral")
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        **TINY_HF_SHAPE,
        num_local_experts=E,
        num_experts_per_tok=K,
        output_router_logits=True,
        router_aux_loss_coef=COEF,
    )
    reference = transformers.MixtralForCausalLM._from_config(
        config, attn_implementation="eager", dtype=torch.float32
    )
    with torch.no_grad():
        for p in reference.parameters():
            p.add_(0.3 * torch.randn_like(p))
    reference.save_pretrained(path)
    tiny_tokenizer(path)
    return path, reference.eval(), zoo_models.load_hf(path)


def _batch(ids: np.ndarray) -> dict[str, np.ndarray]:
    """transformers' ``labels=ids``: each token predicts the next, the last predicts nothing."""
    b, t = ids.shape
    targets = np.concatenate([ids[:, 1:], np.zeros((b, 1), ids.dtype)], axis=1)
    mask = np.ones((b, t), np.float32)
    mask[:, -1] = 0.0
    positions = np.broadcast_to(np.arange(t, dtype=np.int32), (b, t))
    return {
        "input_ids": ids.astype(np.int32),
        "targets": targets.astype(np.int32),
        "positions": positions,
        "segment_ids": np.ones((b, t), np.int32),
        "loss_mask": mask,
    }


def test_the_training_loss_adds_the_router_losses_with_their_weights(hf_mixtral):
    _, reference, model = hf_mixtral
    ids = np.random.default_rng().integers(0, TINY_HF_SHAPE["vocab_size"], (2, 12))
    with torch.no_grad():
        out = reference(torch.as_tensor(ids), labels=torch.as_tensor(ids))
    want_ce = float(out.loss) - COEF * float(out.aux_loss)
    # The router statistics from transformers' router logits, in float64.
    logits = np.stack([r.numpy() for r in out.router_logits]).astype(np.float64)  # [L, N, E]
    top = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    want_z = np.mean(lse**2)
    chosen = np.argsort(-logits, axis=-1)[..., :K]
    load = np.stack([np.bincount(c.reshape(-1), minlength=E) for c in chosen]) / chosen[0].size

    def loss(**weights):
        fn = zoo_train.make_lm_loss(compute_dtype="float32", **weights)
        total, aux = eqx.filter_jit(fn)(model, _batch(ids), jax.random.key(0))
        return float(total / aux["weight"]), {k: float(v / aux["weight"]) for k, v in aux.items()}

    # By default the checkpoint's coefficient (output_router_logits is on): transformers' loss.
    got, aux = loss()
    np.testing.assert_allclose(got, float(out.loss), rtol=2e-5)
    np.testing.assert_allclose(aux["moe_aux_loss"], float(out.aux_loss), rtol=1e-5)
    np.testing.assert_allclose(aux["moe_z_loss"], want_z, rtol=1e-5)
    for layer in range(2):
        np.testing.assert_allclose(aux[f"experts/busiest/{layer}"], load[layer].max(), rtol=1e-6)
        np.testing.assert_allclose(aux[f"experts/idlest/{layer}"], load[layer].min(), rtol=1e-6)
    # Settings override the coefficient and add the z-loss.
    got, _ = loss(router_aux_loss=0.5, router_z_loss=0.1)
    np.testing.assert_allclose(got, want_ce + 0.5 * float(out.aux_loss) + 0.1 * want_z, rtol=2e-5)
    got, _ = loss(router_aux_loss=0.0)
    np.testing.assert_allclose(got, want_ce, rtol=2e-5)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``zoo train --model mixtral-tiny`` for 3 steps, a record every step, progress shown."""
    root = tmp_path_factory.mktemp("moe_cli")
    write_corpus(root / "corpus")
    code = main([
        "train", "--model", "mixtral-tiny", "--data", str(root / "corpus"),
        "--out", str(root / "run"), "--steps", "3", "--batch-size", "2", "--seq-len", "32",
        "--eval-every", "0", "--set", "log_every=1", "--set", "sample_tokens=0",
        "--set", "model_config.d_model=32", "--set", "model_config.mlp_hidden=32",
    ])  # fmt: skip
    assert code == 0
    return root


def test_train_records_the_router_losses_and_the_expert_balance(trained):
    records = zoo_train.read_metrics(trained / "run" / zoo_train.METRICS_FILE)
    train = [r for r in records if "moe_aux_loss" in r]
    assert len(train) == 3
    for r in train:
        # mixtral-tiny trains with the load-balancing loss at transformers' default weight.
        assert r["loss"] == pytest.approx(r["ce"] + 0.001 * r["moe_aux_loss"], rel=1e-5)
        assert r["moe_aux_loss"] >= 2.0 - 1e-4  # top-k 2: the minimum, reached when even
        for layer in range(2):
            busiest, idlest = r[f"experts/busiest/{layer}"], r[f"experts/idlest/{layer}"]
            assert 0.0 <= idlest <= 1 / 8 <= busiest <= 1.0


def test_the_run_records_its_grouped_matmul_kernel_beside_attentions(trained):
    tiled = grouped.get_kernel("tiled")  # zoo-layers' kernel, the default on CPU
    want = [
        {"kernel": "tiled", "version": tiled.version, "source": "default", "fallback_reason": None}
    ]
    records = zoo_train.read_metrics(trained / "run" / zoo_train.METRICS_FILE)
    start = next(r for r in records if r.get("event") == "start")
    assert start["grouped_matmul"] == want == start["provenance"]["grouped_matmul"]
    assert [k["kernel"] for k in start["attention"]] == [
        k["kernel"] for k in start["provenance"]["attention"]
    ]
    checkpoints = zoo_train.Checkpointer(trained / "run" / zoo_train.CHECKPOINT_DIR)
    try:
        meta = checkpoints.read_meta(checkpoints.steps()[-1])
    finally:
        checkpoints.close()
    assert meta["provenance"]["grouped_matmul"] == want


def test_progress_line_shows_the_balance(trained, tmp_path, capsys):
    code = main([
        "train", "--model", "mixtral-tiny", "--data", str(trained / "corpus"),
        "--out", str(tmp_path / "run"), "--steps", "1", "--batch-size", "2", "--seq-len", "16",
        "--eval-every", "0", "--set", "log_every=1", "--set", "sample_tokens=0",
        "--set", "model_config.d_model=32", "--set", "model_config.mlp_hidden=32",
        "--set", "model_config.n_layers=1",
    ])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "experts=" in err and "(even 0.125)" in err, err[-2000:]
    start = next(line for line in err.splitlines() if "zoo: starting" in line)
    assert "attention kernel: " in start and "; grouped matmul: tiled " in start, start


# a mixture's LoRA, generation and eval: test_families_hf[mixtral]; --from-run: test_cli_run
@pytest.mark.full
def test_finetune_generate_and_eval_of_the_run(trained, capsys):
    root = trained
    code = main([
        "finetune", "--from-run", str(root / "run"), "--data", str(root / "corpus"),
        "--out", str(root / "ft"), "--steps", "2", "--batch-size", "2", "--seq-len", "32",
        "--lora-rank", "2", "--no-progress", "--eval-every", "0",
    ])  # fmt: skip
    assert code == 0
    adapter = json.loads((root / "ft" / "adapter" / ADAPTER_CONFIG).read_text())
    assert adapter["target_modules"] == ["k_proj", "o_proj", "q_proj", "v_proj"]
    capsys.readouterr()
    args = ["--prompt", "def", "--greedy", "--max-new-tokens", "6"]
    assert main(["generate", str(root / "ft"), *args]) == 0
    assert capsys.readouterr().out.startswith("def")
    assert main(["eval", str(root / "run"), "--data", str(root / "corpus"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert np.isfinite(result["loss"]) and result["loss"] > 0


def _rewrite(path, out, *, change=None, drop=None):
    shutil.copytree(path, out)
    config = json.loads((path / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, **(change or {})}))
    weights = load_file(path / "model.safetensors")
    save_file({k: v for k, v in weights.items() if k != drop}, out / "model.safetensors")
    return out


@pytest.mark.parametrize(
    ("change", "drop", "needle"),
    [
        ({"num_experts_per_tok": 5}, None, "num_experts_per_tok 5 for 4 experts"),
        (None, "model.layers.1.block_sparse_moe.experts.2.w3.weight", "experts.2.w3.weight"),
    ],
    ids=["top-k", "missing-expert"],
)
def test_bad_expert_checkpoints_exit_2_in_one_sentence(
    hf_mixtral, change, drop, needle, tmp_path, capsys
):
    bad = _rewrite(hf_mixtral[0], tmp_path / "bad", change=change, drop=drop)
    assert main(["generate", str(bad), "--prompt", "x", "--max-new-tokens", "1"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("zoo")]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err, err
