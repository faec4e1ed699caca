"""``zoo finetune --objective distill --teacher PATH_OR_RUN``: knowledge distillation. The student
(``--from-hf`` or ``--from-run``, fully or with LoRA adapters) learns the teacher's next-token
distributions on the responses of its data: the forward KL, the reverse KL or the generalized
Jensen-Shannon divergence between them (Agarwal et al. 2024, "On-policy distillation of language
models"), as TRL's ``GKDTrainer.generalized_jsd_loss`` computes it, under its names ``beta`` and
``temperature``. The teacher's logits are computed in the same step, forward only and with no
gradient: the trainer's model is the pair (student, teacher), the teacher its frozen half,
sharded like the student by the same rules."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._loss import token_losses
from .._precision import cast_floating, resolve_compute_dtype
from .._usage import UsageError
from ..loop import Trainer
from ..parallel import platform_of
from ..peft import ADAPTER_DIR, LoRAConfig, SaveAdapters
from ..settings import DistillConfig, FinetuneSettings
from . import _steps as steps


def distill(s: FinetuneSettings) -> int:
    """Distil the teacher ``s.teacher`` into ``s.from_hf`` or ``s.from_run`` on the data of
    ``s.data``, into ``s.out`` (resuming what is there), and export the student to
    ``s.export_hf``; returns the exit code."""
    steps.check_finetune(s, _check)
    if steps.already_complete(s):  # nothing is loaded, nothing in the run is touched
        return 0
    out = pathlib.Path(s.out)
    with steps.output_directory(out), steps.open_trackers(s, out) as trackers:
        mesh, rules = steps.mesh_and_rules(s.mesh_text, s.sharding)
        saved = steps.saved_provenance(out)
        student, lora = steps.finetune_source(s, out, mesh, rules, seq_len=s.seq_len)
        teacher = load_teacher(s, student, mesh, rules)
        with steps.build_data(s, student.tokenizer) as data:
            s = steps.epochs_as_steps(s, data.train)
            trainer = distill_trainer(s, student, teacher, lora, mesh)
            result = steps.train_and_report(
                trainer, s, "finetune", student, data, lora, saved, trackers
            )
        steps.finish_finetune(s, trainer, student, lora, result, trackers, part=_student)
    return 0


def _check(s: FinetuneSettings) -> None:
    """A teacher, a ``--beta`` in [0, 1], and data that is not preference pairs."""
    if s.teacher is None:
        raise UsageError(
            "--objective distill learns from a teacher; pass --teacher PATH (a Hugging Face "
            "directory or a zoo run)."
        )
    if s.beta is not None and not 0 <= s.beta <= 1:
        raise UsageError(
            f"--beta must be in [0, 1] for --objective distill (0: forward KL, 1: reverse KL), "
            f"got {s.beta:g}."
        )
    steps.check_data_kind(s, pairs=False)


def distill_config(s: FinetuneSettings) -> DistillConfig:
    """The run's :class:`~zoo_train.settings.DistillConfig`: ``[distill]``, with ``--beta``."""
    return dataclasses.replace(s.distill, beta=s.distill.beta if s.beta is None else s.beta)


def load_teacher(s: FinetuneSettings, student: steps.Model, mesh: Any, rules: Any) -> steps.Model:
    """The teacher of ``--teacher`` (a Hugging Face directory, or a zoo run's newest checkpoint)
    on ``mesh``, sharded by the same rules as the student.

    Raises:
        UsageError: no model there, or a tokenizer or vocabulary other than the student's.
    """
    from .._model_sources import load_model

    weights, tokenizer, what = load_model(
        s.teacher,  # type: ignore[arg-type]
        attention_implementation=s.attention.implementation,
        mesh=mesh,
        rules=rules,
    )
    if _tokens(tokenizer) != _tokens(student.tokenizer):
        raise UsageError(
            f"The teacher {s.teacher!r} has another tokenizer than the student; distil from a "
            "teacher of the same tokenizer (the divergence compares their ids one to one)."
        )
    config = weights.config
    if config.vocab_size != student.config.vocab_size:
        raise UsageError(
            f"The teacher {s.teacher!r} has {config.vocab_size:,} logits a token and the student "
            f"{student.config.vocab_size:,}; distil from a teacher of the student's vocabulary."
        )
    steps.check_mesh_fits(mesh, rules, config)
    path = str(pathlib.Path(s.teacher).resolve())  # type: ignore[arg-type]
    return steps.Model(weights, config, tokenizer, {"kind": "teacher", "path": path}, name=what)


def _tokens(tokenizer: Any) -> tuple[Any, ...]:
    """What decides a tokenizer's ids for every text (a chat template aside)."""
    inner = getattr(tokenizer, "tokenizer", None)
    text = inner.to_str() if inner is not None and hasattr(inner, "to_str") else None
    bos = getattr(tokenizer, "bos_id", None)
    return type(tokenizer).__name__, tokenizer.vocab_size, bos, tokenizer.eos_id, text


def distill_trainer(
    s: FinetuneSettings,
    student: steps.Model,
    teacher: steps.Model,
    lora: LoRAConfig | None,
    mesh: Any,
) -> Trainer:
    """The trainer of the pair (student, teacher): the student's weights trained (or its LoRA
    adapters alone, which a hook saves after the last step), the teacher frozen."""
    config = distill_config(s)
    steps.say(
        f"zoo: distil {teacher.name}: {config.divergence}, temperature {config.temperature:g}"
    )
    weights, trainable = steps.adapted(s, student, lora)
    pair = DistillPair(weights, teacher.model)
    filter_spec = DistillPair(eqx.is_inexact_array if trainable is None else trainable, False)
    objective = {"name": "distill", "teacher": teacher.init["path"], **config.to_dict()}
    info = steps.run_info(student, lora=lora, objective=objective)
    dtype = resolve_compute_dtype(s.compute_dtype, platform_of(mesh))
    loss = DistillLoss(config, compute_dtype=dtype)
    trainer = Trainer(
        s.train_config(), pair, loss, s.out, mesh=mesh, trainable=filter_spec, run_info=info
    )
    if lora is not None:
        adapters = pathlib.Path(s.out) / ADAPTER_DIR
        saving = SaveAdapters(
            lora, adapters, model_config=info["model_config"], init=info["init"], part=_student
        )
        trainer.add_hook(saving, every=0)
    return trainer


def _student(pair: DistillPair) -> PyTree:
    """The student of a trained pair: what is saved, exported and sampled."""
    return pair.student


class DistillPair(eqx.Module):
    """What a distillation trains: the student, with the teacher beside it as the frozen half
    (no gradient, no optimizer state; checkpointed with the run)."""

    student: PyTree
    teacher: PyTree

    @property
    def config(self) -> Any:
        """The student's configuration."""
        return self.student.config


def generalized_jsd(
    student_logits: Float[Array, "B T V"],
    teacher_logits: Float[Array, "B T V"],
    *,
    beta: float,
    temperature: float = 1.0,
) -> Float[Array, "B T"]:
    """Each token's generalized Jensen-Shannon divergence between the student's and the
    teacher's next-token distributions at ``temperature``, in float32: ``beta = 0`` is the
    forward KL (teacher to student), ``beta = 1`` the reverse KL, and in between
    ``beta KL(teacher || M) + (1 - beta) KL(student || M)`` with the mixture
    ``M = (1 - beta) student + beta teacher`` (TRL's ``generalized_jsd_loss``, per token)."""
    s = jax.nn.log_softmax(student_logits.astype(jnp.float32) / temperature, axis=-1)
    t = jax.nn.log_softmax(teacher_logits.astype(jnp.float32) / temperature, axis=-1)
    if beta == 0:
        return jnp.sum(jnp.exp(t) * (t - s), axis=-1)
    if beta == 1:
        return jnp.sum(jnp.exp(s) * (s - t), axis=-1)
    mixture = jnp.logaddexp(s + jnp.log1p(-beta), t + jnp.log(beta))
    to_teacher = jnp.sum(jnp.exp(t) * (t - mixture), axis=-1)
    to_student = jnp.sum(jnp.exp(s) * (s - mixture), axis=-1)
    return beta * to_teacher + (1 - beta) * to_student


class DistillLoss:
    """``loss_fn(pair, batch, key) -> (loss_sum, aux)`` of a :class:`DistillPair`: the divergence
    summed over the batch's weighted tokens (the responses), ``aux["weight"]`` their count and
    ``aux["ce"]`` the student's own cross entropy on them (its perplexity in evaluations). The
    teacher's logits come from the same forward pass of the step, with no gradient."""

    unit = "tokens"

    def __init__(self, config: DistillConfig, *, compute_dtype: Any = None) -> None:
        self.config = config
        self.compute_dtype = None if compute_dtype is None else jnp.dtype(compute_dtype)

    def __call__(
        self, model: DistillPair, batch: dict[str, Array], key: Any
    ) -> tuple[Array, dict[str, Array]]:
        def logits(m: PyTree) -> Array:
            if self.compute_dtype is not None:
                m = cast_floating(m, self.compute_dtype)
            inputs = {"positions": batch["positions"], "segment_ids": batch["segment_ids"]}
            return m(batch["input_ids"], **inputs)

        student = logits(model.student)
        teacher = jax.lax.stop_gradient(logits(model.teacher))
        c = self.config
        per_token = generalized_jsd(student, teacher, beta=c.beta, temperature=c.temperature)
        ce, _ = token_losses(student, batch["targets"])
        mask = batch["loss_mask"].astype(jnp.float32)
        aux = {"weight": jnp.sum(mask), "ce": jnp.sum(ce * mask)}
        return jnp.sum(per_token * mask), aux
