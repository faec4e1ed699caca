"""The settings of ``zoo train`` and ``zoo finetune``: the run config's (:class:`TrainConfig`,
whose settings they extend) and the concepts only the command line has: where a run reads and
writes, its attention kernel, W&B, lm-eval while training, and for ``zoo finetune`` the model's
source, its LoRA adapters and the objective (GRPO's and distillation's settings are their own
concepts' classes, :class:`GRPOConfig` and :class:`DistillConfig`).

Each setting's key in config files and ``--set``, its type, default, help, flag and whether it
is part of the run's identity are read off these classes (:mod:`._fields`); the defaults are
those of ``zoo train`` with no arguments (the ``make train`` job), and :func:`finetune_defaults`
changes a few for fine-tuning.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._usage import UsageError
from ._distill_config import DistillConfig
from ._fields import section, setting, table
from ._grpo_config import GRPOConfig
from ._loop import TrainConfig
from ._optimizer import WARMUP_FRACTION, OptimizerConfig, default_warmup

#: ``zoo finetune --objective``: next-token loss, a preference objective on pairs, or GRPO on
#: prompts scored by reward functions.
OBJECTIVES = ("sft", "dpo", "ipo", "simpo", "orpo", "grpo", "distill")


@dataclasses.dataclass(frozen=True)
class AttentionSettings:
    """``[attention]``: which kernel serves attention, and which versions are acceptable (not
    part of the run's identity: a run resumed on another kernel is the same run)."""

    implementation: str | None = setting(
        None,
        "attention kernel name (none: default order)",
        flag="--attention-implementation",
        metavar="KERNEL",
    )
    require: str | None = setting(
        None,
        "kernel version range, e.g. zoo-flash-tpu>=0.1,<0.2",
        flag="--attention-require",
        metavar="REQ",
    )


@dataclasses.dataclass(frozen=True)
class WandbSettings:
    """``[wandb]``: the W&B run of ``--tracker wandb`` (not part of the run's identity)."""

    project: str = setting("zoo", "W&B project", flag="--wandb-project", metavar="NAME")
    name: str | None = setting(
        None,
        "W&B run name (none: the output directory's name)",
        flag="--wandb-name",
        metavar="NAME",
    )
    tags: list[str] = setting([], "W&B run tags", flag="--wandb-tags", nargs="+", metavar="TAG")


@dataclasses.dataclass(frozen=True)
class EvalHarnessSettings:
    """``[eval_harness]``: lm-evaluation-harness tasks run on the model while it trains."""

    tasks: str | None = setting(
        None,
        "lm-eval tasks to run while training, comma-separated (needs zoo-train[eval])",
        flag="--eval-harness",
        metavar="T1,T2",
        later=True,
    )
    every: int = setting(
        0,
        "run them every N steps and after the last (0: after the last step only)",
        flag="--eval-harness-every",
        metavar="N",
        within="[0, inf)",
        later=True,
    )
    at_start: bool = setting(
        False,
        "also run them on the model before its first step (step 0)",
        flag="--eval-harness-at-start",
        switch=True,
        later=True,
    )
    include_path: str | None = setting(
        None,
        "a directory of task YAML files",
        flag="--eval-harness-include-path",
        metavar="DIR",
        later=True,
    )
    limit: int | None = setting(
        None,
        "at most N documents per task",
        flag="--eval-harness-limit",
        metavar="N",
        within="[1, inf)",
        later=True,
    )
    batch_size: int = setting(
        16,
        "requests per forward pass",
        flag="--eval-harness-batch-size",
        metavar="N",
        within="[1, inf)",
        later=True,
    )


@dataclasses.dataclass(frozen=True)
class RunInputs:
    """What a run of the command line reads and where it writes: the first of its settings."""

    model: str = setting(
        "llama-tiny", "model preset (see `zoo models`)", flag="--model", metavar="PRESET"
    )
    data: list[str] = setting(
        [],
        "token stores, or text files, directories, globs, .jsonl, Parquet or Arrow (prepared "
        "once into a store); empty = the stdlib corpus",
        flag="--data",
        nargs="+",
        metavar="PATH",
        flag_help="token stores (zoo data prepare), or text files, directories, globs, .jsonl, "
        "Parquet or Arrow, prepared once into a store (default: the Python stdlib's source)",
    )
    eval_data: list[str] = setting(
        [],
        "held-out data evaluated instead of a split of `data`",
        flag="--eval-data",
        nargs="+",
        metavar="PATH",
        flag_help="held-out data to evaluate on instead of a split of --data",
    )
    data_weights: list[float] = setting(
        [],
        "each --data source's share of the training rows (empty: in proportion to their sizes)",
        flag="--data-weights",
        nargs="+",
        metavar="W",
        within="(0, inf)",
    )
    data_cache: str | None = setting(
        None,
        "where raw --data is prepared into token stores, once (none: .zoo-data-cache beside "
        "the output directory)",
        flag="--data-cache",
        metavar="DIR",
        identity=False,
    )
    tokenizer: str | None = setting(
        None,
        "tokenizer.json or a Hugging Face directory (none: the byte tokenizer for zoo train, "
        "the model's own for zoo finetune)",
        flag="--tokenizer",
        metavar="PATH",
    )
    out: str = setting(
        "runs/default",
        "output directory (checkpoints, metrics, loss curve)",
        flag="--out",
        metavar="DIR",
        identity=False,
    )


def _command_optimizer() -> OptimizerConfig:
    """``[optimizer]`` of the command line: a warm-up that follows from the run's length."""
    return OptimizerConfig(warmup_steps=None)


# A dataclass lays out its bases' fields from the last base to the first: the inputs lead
# (and lead `--help`), then the loop's settings, then the rest.
@dataclasses.dataclass(frozen=True)
class RunSettings(TrainConfig, RunInputs):
    """The settings of ``zoo train`` (and the shared part of ``zoo finetune``): the run
    config's (:class:`TrainConfig`, which :meth:`train_config` gives with the warm-up resolved)
    and what the command line alone has."""

    epochs: float | None = setting(
        None,
        "passes over the training data, instead of steps (steps follow from the data's size)",
        flag="--epochs",
        metavar="N",
        within="(0, inf)",
    )
    seq_len: int = setting(128, "tokens per row", flag="--seq-len", metavar="N", within="[1, inf)")
    stop_at: int | None = setting(
        None,
        "end this call after this step (resume later with the same settings)",
        flag="--stop-at",
        metavar="STEP",
        within="[1, inf)",
        identity=False,
    )
    warmup_fraction: float = setting(
        WARMUP_FRACTION,
        "warm-up as a fraction of the run when warmup_steps is none (at least 10 steps, at most "
        "half the run)",
        key="optimizer.warmup_fraction",  # the run's own part of the [optimizer] table
        within="[0, 1]",
    )
    val_fraction: float = setting(
        0.05, "fraction of documents held out for evaluation", within="[0, 1)"
    )
    text_field: str = setting(
        "text",
        "the field of each .jsonl line (or column of Parquet and Arrow) that holds its text",
        flag="--text-field",
        metavar="NAME",
    )
    max_bytes: int = setting(
        3_000_000,
        "size of the stdlib corpus (when `data` is empty)",
        flag="--max-bytes",
        metavar="N",
        within="[1, inf)",
    )
    trackers: list[str] = setting(
        ["jsonl", "tensorboard"],
        "where metrics go: jsonl (metrics.jsonl, always), tensorboard (OUT/tensorboard), wandb",
        flag="--tracker",
        nargs="+",
        metavar="NAME",
        flag_help="where metrics go besides metrics.jsonl: tensorboard (OUT/tensorboard), wandb "
        "(zoo-train[wandb]); default: jsonl tensorboard",
        identity=False,
    )
    sample_tokens: int = setting(
        300,
        "tokens sampled at the end (0: none)",
        flag="--sample-tokens",
        metavar="N",
        within="[0, inf)",
        identity=False,
    )
    prompt: str = setting(
        "def ", "prompt of the final sample", flag="--prompt", metavar="TEXT", identity=False
    )
    temperature: float = setting(
        0.8, "sampling temperature of the final sample", within="(0, inf)", identity=False
    )
    optimizer: OptimizerConfig = section(OptimizerConfig, default=_command_optimizer)
    attention: AttentionSettings = section(AttentionSettings, identity=False)
    wandb: WandbSettings = section(WandbSettings, identity=False)
    eval_harness: EvalHarnessSettings = section(EvalHarnessSettings)
    model_config: dict[str, Any] = table(
        "fields of zoo_models.ModelConfig to change on the preset (e.g. n_layers)"
    )

    @property
    def mesh_text(self) -> str:
        """The mesh as ``data=…,fsdp=…,tensor=…`` (and ``expert=…`` when not 1)."""
        return str(self.mesh)

    @property
    def lr(self) -> float:
        """The peak learning rate (``lr``, the optimizer's)."""
        return self.optimizer.lr

    def train_config(self) -> TrainConfig:
        """The :class:`~zoo_train.TrainConfig` of this run: the loop's settings as they are, and
        the optimizer's warm-up a count of steps (``warmup_fraction`` of the run when
        ``optimizer.warmup_steps`` is none; at most the run)."""
        loop = {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainConfig)}
        warmup = self.optimizer.warmup_steps
        try:
            if warmup is None:
                warmup = default_warmup(self.steps, self.warmup_fraction)
            optimizer = dataclasses.replace(self.optimizer, warmup_steps=min(warmup, self.steps))
            return TrainConfig(**{**loop, "sharding": dict(self.sharding), "optimizer": optimizer})
        except ValueError as e:
            raise UsageError.from_error(e) from None


@dataclasses.dataclass(frozen=True)
class LoRASettings:
    """``[lora]``: the adapters of a LoRA fine-tune."""

    rank: int = setting(
        0, "LoRA rank (0: full fine-tuning)", flag="--lora-rank", metavar="R", within="[0, inf)"
    )
    alpha: float = setting(
        16.0,
        "LoRA alpha (the update is scaled by alpha / rank)",
        flag="--lora-alpha",
        metavar="ALPHA",
        within="(0, inf)",
    )
    targets: list[str] = setting(
        [],
        "LoRA targets: q k v o gate up down (none: by family)",
        flag="--lora-targets",
        nargs="+",
        metavar="T",
        flag_help="projections to adapt: q k v o gate up down (default: q k v o; GPT-2 o up down)",
    )
    from_: str | None = setting(
        None,
        "continue training this PEFT adapter directory (its rank and targets)",
        key="from",
        flag="--lora-from",
        metavar="ADAPTER_DIR",
    )


@dataclasses.dataclass(frozen=True)
class FinetuneSettings(RunSettings):
    """The settings of ``zoo finetune``: those of ``zoo train`` and where the model comes from,
    where it goes, and its LoRA adapters."""

    from_hf: str | None = setting(
        None, "fine-tune from a Hugging Face directory", flag="--from-hf", metavar="DIR"
    )
    from_run: str | None = setting(
        None, "fine-tune from a zoo run directory", flag="--from-run", metavar="DIR"
    )
    export_hf: str | None = setting(
        None,
        "write the fine-tuned model here (Hugging Face format)",
        flag="--export-hf",
        metavar="DIR",
        identity=False,  # checked on its own: a finished run's export must hold its last step
    )
    overwrite: bool = setting(
        False,
        "let --export-hf replace a non-empty directory or the source model",
        flag="--overwrite",
        switch=True,
        identity=False,
    )
    objective: str = setting(
        "sft",
        "sft (next-token loss on the responses), preference tuning on pairs: dpo, ipo, "
        "simpo or orpo, grpo (rewards of sampled completions), or distill (a teacher's "
        "next-token distributions)",
        flag="--objective",
        metavar="NAME",
    )
    beta: float | None = setting(
        None,
        "beta of the preference objective (none: 0.1 for dpo, ipo and orpo; 2.0 for simpo), "
        "GRPO's KL weight (none: 0, no reference), or distillation's interpolation between "
        "forward (0) and reverse (1) KL (none: 0.5)",
        flag="--beta",
        metavar="BETA",
        within="[0, inf)",
    )
    simpo_gamma: float = setting(
        0.5,
        "SimPO's target reward margin gamma",
        flag="--simpo-gamma",
        metavar="GAMMA",
        within="[0, inf)",
    )
    teacher: str | None = setting(
        None,
        "the teacher of --objective distill: a Hugging Face directory or a zoo run of the "
        "student's tokenizer",
        flag="--teacher",
        metavar="PATH_OR_RUN",
        later=True,
    )
    lora: LoRASettings = section(LoRASettings)
    grpo: GRPOConfig = section(GRPOConfig)
    distill: DistillConfig = section(DistillConfig)


def finetune_defaults() -> FinetuneSettings:
    """``zoo finetune`` starts from trained weights: a smaller learning rate, a short run."""
    base = FinetuneSettings()
    return dataclasses.replace(
        base,
        out="runs/finetune",
        steps=200,
        checkpoint_every=50,
        eval_every=50,
        sample_tokens=0,
        optimizer=dataclasses.replace(base.optimizer, lr=1e-4),
        warmup_fraction=0.05,
    )
