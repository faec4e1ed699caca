"""Distillation (``zoo finetune --objective distill``): the divergence against TRL's
``GKDTrainer.generalized_jsd_loss`` on fixed logits (values and gradients, every ``beta`` and
temperature), the loss of a batch against TRL's on the logits ``transformers`` gives the same
student and teacher, and the command end to end: a student that is its own teacher starts at a
loss of exactly 0, a LoRA student learns from another teacher and exports like SFT, a zoo run
serves as teacher, and a teacher of another tokenizer is refused in one sentence."""

from __future__ import annotations

import json
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_train.cli import main
from zoo_train.recipes import DistillLoss, DistillPair, generalized_jsd
from zoo_train.settings import DistillConfig
from zoo_train.testing import tiny_hf_llama, write_corpus

torch = pytest.importorskip("torch")
gkd = pytest.importorskip("trl.experimental.gkd")
F = torch.nn.functional

BETAS = (0.0, 0.1, 0.5, 0.9, 1.0)
TEMPERATURES = (1.0, 0.7, 2.0)


def _trl(student: np.ndarray, teacher: np.ndarray, labels: np.ndarray, beta: float, t: float):
    """TRL's loss (float64) and its gradient with respect to the student's logits."""
    s = torch.tensor(student, dtype=torch.float64, requires_grad=True)
    loss = gkd.GKDTrainer.generalized_jsd_loss(
        s, torch.tensor(teacher, dtype=torch.float64), torch.tensor(labels), beta=beta,
        temperature=t,
    )  # fmt: skip
    loss.backward()
    return float(loss.detach()), s.grad.numpy()


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("beta", BETAS)
def test_the_divergence_is_trls_on_fixed_logits(beta: float, temperature: float):
    rng = np.random.default_rng(7)
    b, t, v = 3, 9, 41
    student = (rng.standard_normal((b, t, v)) * 3).astype(np.float32)
    teacher = (rng.standard_normal((b, t, v)) * 3).astype(np.float32)
    mask = rng.random((b, t)) < 0.6
    mask[0, 0] = True  # at least one counted token
    labels = np.where(mask, 1, -100)
    want, want_grad = _trl(student, teacher, labels, beta, temperature)

    def mean(s: jax.Array) -> jax.Array:
        per_token = generalized_jsd(s, jnp.asarray(teacher), beta=beta, temperature=temperature)
        return jnp.sum(per_token * mask) / mask.sum()

    got, grad = jax.value_and_grad(mean)(jnp.asarray(student))
    np.testing.assert_allclose(float(got), want, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-4, atol=1e-7)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("distill")
    return {
        "student": tiny_hf_llama(root / "student", seed=1),
        "teacher": tiny_hf_llama(root / "teacher", seed=2),
        "corpus": write_corpus(root / "corpus"),
        "root": root,
    }


@pytest.mark.parametrize("beta", [0.0, 0.5, 1.0])
def test_a_batchs_loss_is_trls_on_transformers_logits(models, beta: float):
    """The loss of a batch of two rows (responses weighted from the fifth token) is TRL's on
    the logits ``transformers`` computes with the same student and teacher."""
    from transformers import AutoModelForCausalLM

    import zoo_models

    rng = np.random.default_rng(3)
    ids = rng.integers(3, 256, (2, 17))
    t = ids.shape[1] - 1
    weights = np.zeros((2, t), np.float32)
    weights[:, 4:] = 1.0
    batch = {
        "input_ids": jnp.asarray(ids[:, :-1], jnp.int32),
        "targets": jnp.asarray(ids[:, 1:], jnp.int32),
        "positions": jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (2, t)),
        "segment_ids": jnp.ones((2, t), jnp.int32),
        "loss_mask": jnp.asarray(weights),
    }
    pair = DistillPair(
        zoo_models.load_hf(models["student"], dtype="float32", attention_implementation="xla"),
        zoo_models.load_hf(models["teacher"], dtype="float32", attention_implementation="xla"),
    )
    loss = DistillLoss(DistillConfig(beta=beta), compute_dtype="float32")
    total, aux = loss(pair, batch, jax.random.key(0))
    got = float(total / aux["weight"])

    def hf(directory: pathlib.Path) -> np.ndarray:
        model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float64)
        with torch.no_grad():
            return model(torch.as_tensor(ids)).logits.numpy()

    labels = np.where(weights > 0, ids[:, 1:], -100)
    want, _ = _trl(hf(models["student"])[:, :-1], hf(models["teacher"])[:, :-1], labels, beta, 1.0)
    assert got == pytest.approx(want, rel=2e-5)


def _finetune(models, out: pathlib.Path, *extra: str) -> int:
    # fmt: off
    args = ["finetune", "--objective", "distill", "--from-hf", str(models["student"]),
            "--data", str(models["corpus"]), "--out", str(out), "--steps", "3",
            "--batch-size", "2", "--seq-len", "32", "--log-every", "1", "--eval-every", "0",
            "--no-progress", "--lr", "1e-2"]
    # fmt: on
    return main([*args, *extra])


def _losses(out: pathlib.Path) -> list[float]:
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if "loss" in r]


def test_a_student_that_is_its_own_teacher_starts_at_zero(models, tmp_path):
    out = tmp_path / "self"
    assert _finetune(models, out, "--teacher", str(models["student"]), "--steps", "1") == 0
    assert _losses(out) == [0.0]


def test_a_lora_student_learns_from_its_teacher_and_exports(models, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    out, export = tmp_path / "lora", tmp_path / "export"
    code = _finetune(
        models, out, "--teacher", str(models["teacher"]), "--lora-rank", "4", "--beta", "0",
        "--export-hf", str(export),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert "distil" in err and "forward KL" in err, err
    losses = _losses(out)
    assert losses[0] > 0 and losses[-1] < losses[0], losses
    assert (out / "adapter" / "adapter_config.json").is_file()
    AutoModelForCausalLM.from_pretrained(export)  # exported like SFT: a Hugging Face directory
    # The teacher is part of what the run is: another teacher is another run.
    again = _finetune(models, out, "--teacher", str(models["student"]), "--lora-rank", "4",
                      "--beta", "0", "--steps", "4")  # fmt: skip
    assert again == 2 and "different run" in capsys.readouterr().err


def test_a_zoo_run_teaches_and_another_tokenizer_is_refused(models, tmp_path, capsys):
    run = tmp_path / "teacher-run"
    assert main(["convert", str(models["teacher"]), str(run)]) == 0
    out = tmp_path / "from-run"
    assert _finetune(models, out, "--teacher", str(run), "--steps", "1", "--beta", "1") == 0
    assert _losses(out)[0] > 0
    other = shutil.copytree(models["teacher"], tmp_path / "other")
    spec = json.loads((other / "tokenizer.json").read_text())
    spec["added_tokens"] = [dict(t, content=t["content"] + "x") for t in spec["added_tokens"]]
    (other / "tokenizer.json").write_text(json.dumps(spec))
    capsys.readouterr()
    assert _finetune(models, tmp_path / "refused", "--teacher", str(other)) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "another tokenizer" in line and line.endswith("."), line
    assert not (tmp_path / "refused").exists()
