"""The start of a run: restore or initialise the state, resolve the attention kernel for the
target, and write the start (or resume) record. What it opens is closed by the caller's exit
stack, however the run ends."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import pathlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import jax
from jaxtyping import PyTree

from zoo_data import DataSource

from .._provenance import kernel_label, kernels_line, provenance
from .._state import TrainState
from .._state_plan import is_builder
from .._step import all_finite
from .._step_metrics import StepMetrics, Window
from ..checkpoint import CHECKPOINT_DIR, Checkpointer, Restored
from ..parallel import (
    BatchLayout,
    MeshFunction,
    PackedBatch,
    batch_reader,
    describe_mesh,
    init_sharded,
    is_primary,
    mesh_record,
)
from ..profile import ProfileWindow
from ..settings import TrainConfig
from ._batch_check import BatchChecks, model_vocab_size, nonfinite_cause
from ._evaluate import EvalData, evaluate
from ._metrics_file import METRICS_FILE, MetricsWriter
from ._prefetch import Prefetcher
from ._progress import Progress, rows_per_epoch
from ._reporter import Reporter
from ._run_identity import jsonable, mesh_change, resume_check, run_identity, steps_change
from ._stop import StopRequest, stop_requests

if TYPE_CHECKING:  # the trainer starts its runs here
    from ._trainer import Trainer

logger = logging.getLogger("zoo_train")


@dataclasses.dataclass
class Position:
    """Where a run in progress stands: the one part of a run that changes as it goes.

    Attributes:
        step, state: the last step taken and the state after it.
        batch, data_state: the next step's batch and the loader's position after it.
        last_eval: the last evaluation record.
    """

    step: int
    state: TrainState
    batch: Any
    data_state: Any
    last_eval: dict[str, Any] | None


@dataclasses.dataclass(frozen=True)
class Run:
    """A run in progress: what the step loop and its hooks read. Only :attr:`now` changes.

    Attributes:
        config, out: the run's settings and output directory.
        start, end: the step this call started from and the last step it takes.
        now: where the run stands (:class:`Position`).
        resumed: whether the run resumed from a checkpoint.
        skipped: reports of unreadable checkpoints passed over on resume.
        trainer: the trainer the run belongs to (its steps, mesh and loss).
        eval_rows: the layout of an evaluation batch.
        feed: the batches made ahead of the device.
        checkpointer, progress, window, metrics: saves, the bar, the throughput clock and the
            step metrics read late.
        record: writes a metrics record (process 0) and hands it to the caller's watcher.
        meta: what every checkpoint records besides the loader's position and last evaluation.
        stop: the stop request (SIGTERM, Ctrl-C, SIGHUP).
        profile, profile_meta: the traced window and what its capture records.
        make_batch: makes each step's batch from the data's rows with the model being trained
            (the data's own ``make_batch``: GRPO's rollouts), or ``None``: the rows are the
            batch.
    """

    config: TrainConfig
    out: pathlib.Path
    start: int
    end: int
    now: Position
    resumed: bool
    skipped: list[str]
    trainer: Trainer
    eval_rows: BatchLayout
    feed: Prefetcher
    checkpointer: Checkpointer
    progress: Progress
    window: Window
    metrics: StepMetrics
    record: Callable[[dict[str, Any]], None]
    meta: dict[str, Any]
    stop: StopRequest
    profile: ProfileWindow
    profile_meta: dict[str, Any]
    make_batch: Callable[[Any, int, Any], Any] | None = None

    @property
    def train_step(self) -> MeshFunction:
        """The jitted train step."""
        return self.trainer.train_step

    @property
    def eval_step(self) -> MeshFunction:
        """The jitted evaluation step."""
        return self.trainer.eval_step

    @property
    def unit(self) -> str:
        """What the loss's weight counts (``"tokens"``; ``"pairs"`` for preferences)."""
        return self.trainer.unit

    def save(self, step: int, data_state: Any, evaluated: dict[str, float] | None) -> None:
        """Start saving the state as checkpoint ``step`` (ranked by ``evaluated``'s loss)."""
        from ..profile import host_annotation

        self.metrics.drain()  # a step is saved only once it is known to be finite
        with host_annotation("checkpoint"):
            self.checkpointer.save(
                step,
                self.now.state,
                {**self.meta, "data_state": data_state, "last_eval": self.now.last_eval},
                eval_loss=None if evaluated is None else evaluated["eval_loss"],
            )


def start_run(
    trainer: Trainer,
    data: DataSource,
    eval_data: EvalData | None,
    resources: contextlib.ExitStack,
    stop_at: int | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    start_info: Mapping[str, Any] | None = None,
) -> Run:
    """Everything :meth:`Trainer.train` needs before its first step on ``data``: the state
    restored or initialised, the kernel resolved and the start record written (the other
    arguments are :meth:`Trainer.train`'s). What it opens is closed by ``resources``."""
    config, out = trainer.config, trainer.out
    assert out is not None  # Trainer.train refuses a trainer without one
    if stop_at is not None and not 1 <= stop_at <= config.steps:
        raise ValueError(f"`stop_at` must be in [1, steps={config.steps}], got {stop_at}.")
    end = config.steps if stop_at is None else stop_at
    out.mkdir(parents=True, exist_ok=True)
    run_info = trainer.run_info
    identity = run_identity(config, data, run_info)
    checkpointer = Checkpointer(
        out / CHECKPOINT_DIR, keep=config.keep, async_save=config.async_checkpointing
    )
    resources.callback(checkpointer.close)
    stop = resources.enter_context(stop_requests())
    profile = ProfileWindow(config.profile, out, last=end, enabled=is_primary())
    resources.callback(profile.close)
    # The template is abstract: resuming builds no model at all.
    restored = checkpointer.restore(
        trainer.plan.template, check=resume_check(identity, config, out)
    )
    state = _initial_state(trainer.model, data, trainer, restored)
    start = 0 if restored is None else restored.step
    record = _recorder(out, start, on_record, resources)
    checks = BatchChecks(start + 1, model_vocab_size(trainer.plan.abstract_model), data)
    feed = _feed(data, trainer, max(end - start, 1), resources, checks)
    # One batch even for a finished run: its shapes trace the loss and resolve the kernel.
    batch, data_state = feed.next()
    make_batch = getattr(data, "make_batch", None)
    if make_batch is not None:  # the step trains on batches made with the model (rollouts)
        shapes = data.shapes()  # type: ignore[attr-defined]
    else:
        shapes = batch.shapes() if isinstance(batch, PackedBatch) else batch
    resolved = trainer.resolve_kernels(shapes)
    primary = is_primary()
    progress = Progress(config.steps, start, enabled=config.progress and primary, quiet=not primary)
    resources.callback(progress.close)
    meta = _announce(
        progress, record, trainer, restored, identity, run_info, start_info, resolved, end
    )
    eval_rows = BatchLayout(trainer.mesh, trainer.rules, config.batch_size)
    last_eval = None
    if restored is None and eval_data is not None:  # the curve starts untrained
        evaluated = evaluate(
            trainer.eval_step, state, eval_data, eval_rows, config.eval_batches, trainer.unit
        )
        last_eval = report_evaluation(start, evaluated, record, progress)
    label = kernel_label(resolved["attention"])
    tokens_per_step = math.prod(shapes["input_ids"].shape) if "input_ids" in shapes else 0
    window = Window(tokens_per_step, trainer.unit)
    reporter = Reporter(
        config, end, start, window, progress, record, checkpointer, label=label,
        skipped=int(jax.device_get(state.skipped)), extras=_source_tokens(data, config),
        rows_per_epoch=rows_per_epoch(data),
    )  # fmt: skip
    run = Run(
        config=config,
        out=out,
        start=start,
        end=end,
        now=Position(start, state, batch, data_state, last_eval),
        resumed=restored is not None,
        skipped=[] if restored is None else restored.skipped,
        trainer=trainer,
        eval_rows=eval_rows,
        feed=feed,
        checkpointer=checkpointer,
        progress=progress,
        window=window,
        metrics=StepMetrics(reporter, on_ready=reporter.finished, due=reporter.due),
        record=record,
        meta=meta,
        stop=stop,
        profile=profile,
        profile_meta={
            "kernel": label,
            "attention": resolved["attention"],
            "grouped_matmul": resolved["grouped_matmul"],
            "cross_entropy": resolved.get("cross_entropy", []),
            "eval_modules": ["jit_eval_step"],
            "run": str(out),
        },
        make_batch=make_batch,
    )
    vocab = checks.vocab_size
    reporter.diagnose = lambda step: nonfinite_cause(
        checks.facts(step), vocab, bool(jax.device_get(all_finite(run.now.state.params)))
    )
    return run


def _announce(
    progress: Progress,
    record: Callable[[dict[str, Any]], None],
    trainer: Trainer,
    restored: Restored | None,
    identity: dict[str, Any],
    run_info: Mapping[str, Any],
    start_info: Mapping[str, Any] | None,
    resolved: dict[str, list[dict[str, Any]]],
    end: int,
) -> dict[str, Any]:
    """Say how the run starts (and what changed since the checkpoint it resumes), write the
    start record; the metadata every checkpoint of the run records."""
    start = 0 if restored is None else restored.step
    saved = {} if restored is None else restored.meta
    config = trainer.config
    kernels, grouped = resolved["attention"], resolved["grouped_matmul"]
    label, layout = kernel_label(kernels), mesh_record(trainer.mesh)
    progress.write(
        f"zoo: {'resuming from step ' + str(start) if restored else 'starting'}"
        f" → step {end}; attention kernel: {kernels_line(resolved)}; "
        f"mesh {describe_mesh(trainer.mesh)}"
    )
    changed = mesh_change(saved.get("mesh"), layout) if restored else None
    if changed is not None:
        progress.write(f"zoo: the mesh changed since checkpoint {start}: {changed}")
    extended = steps_change(saved.get("identity"), identity) if restored else None
    extensions = list(saved.get("extensions") or [])
    if extended is not None:
        extensions.append({"at_step": start, **extended})
        progress.write(
            f"zoo: the run now ends at step {extended['to']} (was {extended['from']}); "
            "the learning-rate schedule follows the new total"
        )
    skipped = [] if restored is None else restored.skipped  # each logged when it was found
    logger.info("attention kernel: %s", kernels_line(resolved))
    fused = resolved.get("cross_entropy", [])
    prov = provenance(
        attention=kernels,
        grouped_matmul=grouped,
        cross_entropy=fused,
        linear_attention=resolved.get("linear_attention", []),
    )
    record(
        {
            "step": start,
            "event": "resume" if restored else "start",
            "resumed_from": start if restored else None,
            "kernel": label,
            "attention": kernels,
            "grouped_matmul": grouped,
            "cross_entropy": fused,
            "skipped_checkpoints": skipped,
            "provenance": prov,
            "mesh": layout,
            "mesh_changed": changed,
            "steps_changed": extended,
            "config": jsonable(config.to_dict()),
            "compute_dtype": str(trainer.compute_dtype),
            "run_info": jsonable(dict(run_info)),
            **jsonable(dict(start_info or {})),
        }
    )
    return {
        "identity": identity,
        "config": jsonable(config.to_dict()),
        "run_info": jsonable(dict(run_info)),
        "provenance": prov,
        "mesh": layout,
        "extensions": extensions,
    }


def report_evaluation(
    step: int,
    evaluated: dict[str, float],
    record: Callable[[dict[str, Any]], None],
    progress: Progress,
) -> dict[str, Any]:
    """Record and show the evaluation at ``step``; the record."""
    rec = {"step": step, **evaluated}
    record(rec)
    accuracy = evaluated.get("eval_rewards/accuracies")
    shown = (
        f"ppl {evaluated['eval_ppl']:.2f}"
        if "eval_ppl" in evaluated
        else f"reward accuracy {accuracy:.3f}"
        if accuracy is not None
        else f"{evaluated.get('eval_pairs', 0):,.0f} pairs"
    )
    progress.write(f"zoo: step {step}: eval loss {evaluated['eval_loss']:.4f}, {shown}")
    return rec


def _feed(
    data: DataSource,
    trainer: Trainer,
    count: int,
    resources: contextlib.ExitStack,
    checks: BatchChecks,
) -> Prefetcher:
    """``count`` batches of a step's rows with the loader's position after each, made in a
    background thread while the device runs, each host batch checked first (``checks``)."""
    config = trainer.config
    rows = BatchLayout(trainer.mesh, trainer.rules, config.batch_size * config.grad_accum)
    next_batch = batch_reader(data, rows, checks)
    feed = Prefetcher(lambda: (next_batch(), data.state_dict()), count)
    resources.callback(feed.close)
    return feed


def _source_tokens(
    data: DataSource, config: TrainConfig
) -> Callable[[int, int], dict[str, Any]] | None:
    """``tokens/NAME`` of steps ``(a, b]`` for data mixed from several named sources (its
    ``source_tokens(start, stop)`` of global rows), else ``None``."""
    counts = getattr(data, "source_tokens", None)
    if counts is None or len(counts(0, 1 << 12)) < 2:
        return None
    rows = config.batch_size * config.grad_accum
    return lambda a, b: {f"tokens/{k}": v for k, v in counts(a * rows, b * rows).items()}


def _initial_state(
    model: PyTree, data: DataSource, trainer: Trainer, restored: Restored | None
) -> TrainState:
    """The restored state (the loader moved to its position), or a fresh one built sharded."""
    if restored is not None:
        data.load_state_dict(restored.meta["data_state"])
        return restored.state
    plan, mesh = trainer.plan, trainer.mesh
    if is_builder(model):
        return init_sharded(lambda: plan.fresh(model()), mesh=mesh, shardings=plan.shardings)
    return init_sharded(plan.fresh, model, mesh=mesh, shardings=plan.shardings)


def _recorder(
    out: pathlib.Path,
    start: int,
    on_record: Callable[[dict[str, Any]], None] | None,
    resources: contextlib.ExitStack,
) -> Callable[[dict[str, Any]], None]:
    """One writer: process 0 alone writes metrics (dropping records past ``start``, which the
    resumed steps redo) and hands them to ``on_record``; every process computes the same
    values and joins every collective and checkpoint save."""
    if not is_primary():
        return lambda rec: None
    writer = MetricsWriter(out / METRICS_FILE)
    resources.callback(writer.close)
    writer.truncate_after(start)

    def record(rec: dict[str, Any]) -> None:
        writer.write(rec)
        if on_record is not None:
            on_record(rec)

    return record
