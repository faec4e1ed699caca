"""Running the loop of a recipe, with the lines a user reads around it: what starts, what it
trains, what changed since the checkpoint it resumes, and a summary at the end."""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

from ..parallel import is_primary
from ..peft import LoRAConfig
from ..settings import RunSettings, flat
from ..tracking import Trackers
from ._data import Data
from ._epochs import epochs_phrase, many_epochs_warning
from ._harness import harness_hooks
from ._model import Model


def say(message: str) -> None:
    """A line for the user, from process 0 only (tqdm.write keeps an open progress bar intact)."""
    from tqdm.auto import tqdm

    if is_primary():
        tqdm.write(message, file=sys.stderr)


def run_started(out: pathlib.Path) -> bool:
    """Whether a run in ``out`` got as far as training (its start record is written) or has
    checkpoints: a run that failed before then leaves nothing of value behind."""
    from .._runs import checkpoint_steps
    from ..loop import METRICS_FILE

    return (out / METRICS_FILE).exists() or bool(checkpoint_steps(out))


def saved_provenance(out: pathlib.Path) -> dict[int, dict[str, Any] | None]:
    """The provenance recorded in each readable checkpoint of ``out`` (empty: a new run)."""
    from .._runs import read_metas

    return {step: meta.get("provenance") for step, meta in read_metas(out).items()}


@dataclasses.dataclass
class Job:
    """Everything a recipe prepared for the loop.

    Attributes:
        command: ``"train"`` or ``"finetune"``.
        settings: the run's settings.
        out: its output directory.
        mesh, rules: the device mesh and sharding rules.
        model: the model and what it came from.
        data: the loaders.
        lora: the LoRA adapters to train, or ``None``.
        saved: :func:`saved_provenance` of ``out`` before the run.
        trackers: where the run's records go besides ``metrics.jsonl`` (:func:`open_trackers`).
    """

    command: str
    settings: RunSettings
    out: pathlib.Path
    mesh: Any
    rules: Any
    model: Model
    data: Data
    lora: LoRAConfig | None
    saved: dict[int, dict[str, Any] | None]
    trackers: Trackers = dataclasses.field(default_factory=Trackers)

    def model_name(self) -> str:
        """The model as the user named it: the preset, or the checkpoint it came from."""
        if self.command == "train":
            return self.settings.model
        source = getattr(self.settings, "from_hf", None) or getattr(self.settings, "from_run", None)
        return f"{self.model.config.family} model from {source}"

    def stop_tokens(self) -> tuple[int, ...]:
        """Where the model's generation stops (:func:`stop_tokens`)."""
        return stop_tokens(self.settings, self.model)

    def run_info(self) -> dict[str, Any]:
        """What the run records about its model (compared on resume)."""
        from .._runs import model_identity, tokenizer_spec

        info = {
            "model": self.settings.model if self.command == "train" else None,
            "model_config": model_identity(self.model.config),
            "tokenizer": tokenizer_spec(self.model.tokenizer),
            "init": self.model.init,
        }
        objective = getattr(self.settings, "objective", "sft")
        if objective == "grpo":  # a GRPO run resumes only with the same settings
            info["objective"] = {"name": "grpo", "beta": getattr(self.settings, "beta", None)}
        elif objective != "sft":  # a preference run resumes only with the same objective
            s = self.settings
            info["objective"] = {
                "name": objective,
                "beta": getattr(s, "beta", None),
                "simpo_gamma": getattr(s, "simpo_gamma", None) if objective == "simpo" else None,
            }
        return info


def stop_tokens(s: RunSettings, model: Model) -> tuple[int, ...]:
    """Where ``model``'s generation stops: the source checkpoint's generation settings, else
    the tokenizer's EOS."""
    import zoo_models

    from .._runs import read_generation

    source = getattr(s, "from_hf", None) or getattr(s, "from_run", None)
    generation = read_generation(source) if source else {}
    return tuple(zoo_models.stop_token_ids(generation, model.tokenizer))


def open_trackers(s: RunSettings, out: pathlib.Path) -> Trackers:
    """The trackers the settings name, writing into ``out`` (none but on process 0)."""
    from .. import tracking

    wandb = tracking.WandbOptions(s.wandb.project, s.wandb.name, tuple(s.wandb.tags))
    return tracking.open_trackers(s.trackers, out, wandb=wandb, enabled=is_primary())


def run(job: Job, loop: Callable[..., Any], **loop_args: Any) -> Any:
    """Call ``loop`` (``zoo_train.train`` or ``zoo_train.finetune``) on the job, announcing it
    first and summing it up after; returns its ``TrainResult``. Its records go to the job's
    trackers, then its loss curve."""
    from .._parameters import describe_parameters, parameter_summary
    from ..loop import PLOT_FILE
    from ..parallel import describe_mesh

    s, config = job.settings, job.settings.train_config()
    if not job.saved and job.data.headline is not None:
        say(
            f"zoo: {job.command} {job.model_name()} on {job.data.described}: "
            f"{job.data.headline} on mesh {describe_mesh(job.mesh)} -> {job.out}"
        )
    elif not job.saved:
        say(
            f"zoo: {job.command} {job.model_name()} on {job.data.described}: "
            f"{job.data.tokens_per_epoch:,} training tokens, {config.steps} steps of "
            f"{config.batch_size * config.grad_accum} x {s.seq_len} tokens"
            f"{epochs_phrase(s, job.data.train)} on mesh {describe_mesh(job.mesh)} -> {job.out}"
        )
        warning = many_epochs_warning(s, job.data.train)
        if warning is not None:
            say(warning)
    parameters = parameter_summary(
        job.model.model, job.model.config, job.lora, job.model.init.get("dtype")
    )
    say("zoo: " + describe_parameters(parameters, s.compute_dtype, job.mesh))
    started = time.perf_counter()
    reporter = _provenance_reporter(job, _last_settings(job.out) if job.saved else None)

    def on_record(rec: dict[str, Any]) -> None:
        reporter(rec)
        job.trackers.record(rec)

    hooks = harness_hooks(
        s.eval_harness, job.model.tokenizer, steps=config.steps, stop_tokens=job.stop_tokens()
    )
    hooks = [*hooks, *loop_args.pop("hooks", ())]
    result = loop(
        job.model.model,
        job.data.train,
        config=config,
        out=job.out,
        eval_data=job.data.val,
        run_info=job.run_info(),
        stop_at=s.stop_at,
        on_record=on_record,
        mesh=job.mesh,
        start_info={"parameters": parameters, "settings": flat(s)},
        hooks=hooks,
        **loop_args,
    )
    if (job.out / PLOT_FILE).is_file():
        job.trackers.image("loss_curve", job.out / PLOT_FILE, result.step)
    if not trained(result):
        say(
            f"zoo: the run in {job.out} was already complete at step {result.step}; nothing to "
            "train (raise --steps to extend it)."
        )
    elif is_primary():
        _summary(job.out, time.perf_counter() - started, result.start_step, result.step)
    return result


def trained(result: Any) -> bool:
    """Whether this call of the loop took any step (a complete run resumed takes none)."""
    return result.step > result.start_step


#: Settings outside a run's identity that a resumed run may change, said when it does (the
#: reward functions and how GRPO samples: what it trains on from then on).
SAID_WHEN_CHANGED = ("grpo.",)


def _last_settings(out: pathlib.Path) -> dict[str, Any] | None:
    """The settings of the last start (or resume) of the run in ``out``, as its metrics
    recorded them, or ``None``."""
    from ..loop import METRICS_FILE, read_metrics

    starts = [
        r
        for r in read_metrics(out / METRICS_FILE)
        if r.get("event") in ("start", "resume") and isinstance(r.get("settings"), dict)
    ]
    return starts[-1]["settings"] if starts else None


def setting_changes(before: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """``"grpo.reward: a.py:f -> b.py:g"`` for each setting of :data:`SAID_WHEN_CHANGED` that
    differs between ``before`` (``None``: nothing to compare) and ``now``."""
    if before is None:
        return []

    def shown(value: Any) -> str:
        return " ".join(map(str, value)) if isinstance(value, list) else str(value)

    keys = sorted(k for k in {*before, *now} if k.startswith(SAID_WHEN_CHANGED))
    return [
        f"{k}: {shown(before.get(k))} -> {shown(now.get(k))}"
        for k in keys
        if before.get(k) != now.get(k)
    ]


def _provenance_reporter(
    job: Job, settings_before: dict[str, Any] | None
) -> Callable[[dict[str, Any]], None]:
    """A record watcher that says what changed since the checkpoint the run resumes (or, for a
    fine-tune of a zoo run, since its source checkpoint): kernels and versions, and the
    settings a resumed run may change (``settings_before``: those of its last start)."""
    from .._changes import provenance_changes

    def on_record(rec: dict[str, Any]) -> None:
        if rec.get("event") == "resume":
            step = rec.get("resumed_from")
            before = None if step is None else job.saved.get(step)
            what = f"checkpoint {step}"
            for line in setting_changes(settings_before, rec.get("settings") or {}):
                say(f"zoo: changed since {what}: {line}")
        elif rec.get("event") == "start":
            before = job.model.provenance
            what = f"the checkpoint in {getattr(job.settings, 'from_run', None)}"
        else:
            return
        for line in provenance_changes(before, rec.get("provenance") or {}):
            say(f"zoo: changed since {what}: {line}")

    return on_record


def _summary(out: pathlib.Path, wall: float, start_step: int, end_step: int) -> None:
    from ..loop import CHECKPOINT_DIR, METRICS_FILE, PLOT_FILE, read_metrics

    # This call's records only: a resumed run's earlier steps are not its figures.
    records = [r for r in read_metrics(out / METRICS_FILE) if r.get("step", 0) > start_step]
    train = [r for r in records if isinstance(r.get("loss"), int | float)]
    evals = [r for r in records if isinstance(r.get("eval_loss"), int | float)]
    rates = [r["tokens_per_s"] for r in train if isinstance(r.get("tokens_per_s"), int | float)]
    parts = [f"steps {start_step} -> {end_step} in {wall:.1f} s"]
    if rates:
        parts.append(f"{sum(rates) / len(rates):,.0f} tokens/s")
    if len(train) > 1:
        first, last = train[0], train[-1]
        parts.append(
            f"train loss {first['loss']:.3f} (step {first['step']}) -> {last['loss']:.3f} "
            f"(step {last['step']})"
        )
    elif train:  # one record (log_every >= the steps taken): no trend to show
        parts.append(f"train loss {train[0]['loss']:.3f} (steps {start_step + 1}-{end_step})")
    if evals and "eval_ppl" in evals[-1]:
        parts.append(f"eval loss {evals[-1]['eval_loss']:.3f} (ppl {evals[-1]['eval_ppl']:.2f})")
    elif evals and "eval_rewards/accuracies" in evals[-1]:
        first, last = evals[0], evals[-1]
        parts.append(
            f"eval loss {last['eval_loss']:.3f}, reward accuracy "
            f"{first['eval_rewards/accuracies']:.3f} (step {first['step']}) -> "
            f"{last['eval_rewards/accuracies']:.3f} (step {last['step']})"
        )
    say("zoo: " + "; ".join(parts))
    say(
        f"zoo: checkpoints in {out / CHECKPOINT_DIR}, metrics in {out / METRICS_FILE}, "
        f"loss curve in {out / PLOT_FILE}"
    )
