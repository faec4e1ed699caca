"""``train``: the loop that ties data, steps, evaluation, metrics and checkpoints together."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import pathlib
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import equinox as eqx
import jax
from jax.sharding import Mesh
from jaxtyping import PyTree

import zoo_attention
import zoo_layers

from ._config import RESUME_SAFE_FIELDS, TrainConfig
from ._errors import CheckpointMismatchError, NonFiniteLossError, StoppedBySignalError
from ._extension import run_changes, steps_change
from ._loss import LossFn, make_lm_loss
from ._metrics import MetricsWriter, plot_loss_curve, read_metrics
from ._plan import is_builder, plan_state
from ._precision import resolve_compute_dtype
from ._prefetch import Prefetcher
from ._progress import Progress
from ._provenance import attention_resolutions, kernel_label, provenance
from ._state import TrainState
from ._step import EvalFn, make_eval_step, make_train_step
from ._step_metrics import StepMetrics, Window
from ._stop import stop_requests
from .checkpoint import CHECKPOINT_DIR, Checkpointer, holds_run_lock
from .data import Batch, DataSource
from .parallel import (
    BatchLayout,
    PackedBatch,
    batch_reader,
    check_batch,
    check_heads,
    describe_mesh,
    init_sharded,
    is_primary,
    make_mesh,
    make_rules,
    mesh_record,
    platform_of,
)
from .profile import ProfileWindow, host_annotation, step_annotation

logger = logging.getLogger("zoo_train")

METRICS_FILE = "metrics.jsonl"
PLOT_FILE = "loss_curve.png"


class EvalSource(Protocol):
    """Held-out data: ``eval_batches(n, max_batches=None)`` yields fixed-shape batches."""

    def eval_batches(self, n: int, *, max_batches: int | None = None) -> Iterator[Batch]: ...


@dataclasses.dataclass
class TrainResult:
    """What a call to :func:`train` ended with.

    Attributes:
        state: the final ``TrainState`` (``state.model`` is the trained model).
        step: the last step taken.
        start_step: the step this call started from (0, or the resumed checkpoint's step).
        resumed_from: the checkpoint step resumed from, or ``None`` for a fresh start.
        skipped_checkpoints: reports of unreadable checkpoints passed over on resume.
        last_eval: the last evaluation record, if any.
        out: the output directory.
        checkpoint_steps: committed checkpoint steps at the end.
        best_step: the committed step with the lowest eval loss, if any.
    """

    state: TrainState
    step: int
    start_step: int
    resumed_from: int | None
    skipped_checkpoints: list[str]
    last_eval: dict[str, Any] | None
    out: pathlib.Path
    checkpoint_steps: list[int]
    best_step: int | None

    @property
    def model(self) -> PyTree:
        """The trained model."""
        return self.state.model


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _identity(config: TrainConfig, data: DataSource, run_info: dict[str, Any] | None) -> dict:
    settings = {k: v for k, v in config.to_dict().items() if k not in RESUME_SAFE_FIELDS}
    return _jsonable({"config": settings, "data": data.describe(), "run_info": run_info or {}})


def _mesh_change(saved: dict[str, Any] | None, now: dict[str, Any]) -> str | None:
    if not saved:
        return None
    saved = {"processes": 1, **saved}  # recorded before runs of several processes existed
    if all(saved[k] == now[k] for k in ("axes", "devices", "processes")):
        return None

    def show(m: dict[str, Any]) -> str:
        axes = " ".join(f"{k}={v}" for k, v in m["axes"].items())
        n, p = m["devices"], m["processes"]
        where = f"{n} device{'s' if n != 1 else ''}"
        return f"{axes} ({where}{f' in {p} processes' if p != 1 else ''})"

    return f"{show(saved)} → {show(now)}"


class _Reporter:
    """What happens as steps finish (the progress bar, the clock) and when their metrics are
    read, every ``log_every`` steps (the non-finite check, the train record)."""

    def __init__(
        self,
        config: TrainConfig,
        end: int,
        start: int,
        window: Window,
        progress: Progress,
        record: Callable[[dict[str, Any]], None],
        checkpointer: Checkpointer,
        *,
        label: str,
        skipped: int,
    ) -> None:
        self.config, self.end, self.start, self.window = config, end, start, window
        self.progress, self.record, self.checkpointer = progress, record, checkpointer
        self.label = label
        self.skipped = skipped

    def due(self, step: int) -> bool:
        """Whether a train record is written after ``step``."""
        return step % self.config.log_every == 0 or step == self.end

    def finished(self, step: int, t: float) -> None:
        """Step ``step`` was seen finished at ``t`` (its metrics may not be read yet)."""
        if step == self.start + 1:
            self.window.start_clock(t)  # the first step's time is compilation, not training
        else:
            self.window.tick(t)
        self.progress.update(1)

    def __call__(self, step: int, m: dict[str, Any]) -> None:
        if not m["finite"]:
            self._nonfinite(step, m)
        self.window.add(m)
        if self.due(step):
            rec = self.window.record(step, lr=m["lr"])
            rec["skipped_total"] = self.skipped
            rec["kernel"] = self.label
            self.record(rec)
            shown = {"loss": rec.get("loss", m["loss"]), "lr": m["lr"]}
            if rec["tokens_per_s"] is not None:
                shown["tok_s"] = rec["tokens_per_s"]
            self.progress.update(0, **shown)

    def _nonfinite(self, step: int, m: dict[str, Any]) -> None:
        self.skipped += 1
        bad = {"step": step, "event": "nonfinite", "loss": m["loss"], "grad_norm": m["grad_norm"]}
        if self.config.on_nonfinite == "skip":
            self.record({**bad, "action": "skip"})
            return
        self.checkpointer.wait()
        last = self.checkpointer.latest_step()
        self.record({**bad, "action": "stop"})
        what = (
            f"the update made the parameters or optimizer state non-finite (loss {m['loss']}, "
            f"gradient norm {m['grad_norm']})"
            if m.get("update_finite") is False and math.isfinite(m["loss"])
            else f"the loss is {m['loss']} (gradient norm {m['grad_norm']})"
        )
        raise NonFiniteLossError(
            f"Step {step}: {what}; training stopped and the last good checkpoint "
            f"({'step ' + str(last) if last is not None else 'none'}) is kept; lower the "
            "learning rate or set on_nonfinite='skip'.",
            step=step,
            last_checkpoint=last,
        )


def _evaluate(
    eval_step: EvalFn, state: TrainState, source: EvalSource, layout: BatchLayout, limit: int | None
) -> dict[str, float]:
    totals: dict[str, float] = {}
    for batch in source.eval_batches(layout.rows, max_batches=limit):
        placed = layout.place_packed(layout.local_part(batch))
        for k, v in jax.device_get(eval_step(placed, state)).items():
            totals[k] = totals.get(k, 0.0) + float(v)
    weight = totals.get("weight", 0.0)
    if weight <= 0:
        raise ValueError("The evaluation data has no counted tokens; give it longer documents.")
    loss = totals["loss_sum"] / weight
    ce = totals.get("ce", totals["loss_sum"]) / weight
    return {"eval_loss": loss, "eval_ppl": math.exp(min(ce, 700.0)), "eval_tokens": weight}


@holds_run_lock
def train(
    model: PyTree,
    data: DataSource,
    *,
    config: TrainConfig,
    out: str | pathlib.Path,
    eval_data: EvalSource | None = None,
    loss_fn: LossFn | None = None,
    trainable: Callable[[Any], bool] | PyTree[bool] | None = None,
    run_info: dict[str, Any] | None = None,
    stop_at: int | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    mesh: Mesh | None = None,
    start_info: dict[str, Any] | None = None,
) -> TrainResult:
    """Train ``model`` on ``data`` for ``config.steps`` steps, resuming from ``out`` if it holds
    checkpoints.

    The run is laid out on a device mesh (``mesh``, else ``config.mesh`` over every device):
    parameters and optimizer state are sharded by the layers' logical axis names and
    ``config.sharding``, batches split by rows. A checkpoint saved on one mesh resumes on
    another; the change is reported.

    Args:
        model: any Equinox model (pytree), or a zero-argument function that builds one: the
            model is then created directly sharded (no full copy on any device), and not at all
            when resuming. With the default loss it is called as
            ``model(input_ids [B,T], *, positions, segment_ids) -> logits [B,T,V]``.
        data: a :class:`~zoo_train.data.DataSource` (e.g. :class:`~zoo_train.data.PackedLoader`);
            each step draws ``grad_accum * batch_size`` rows.
        config: the run settings.
        out: the output directory: ``metrics.jsonl``, ``loss_curve.png``, ``checkpoints/``.
        eval_data: held-out data with ``eval_batches`` (e.g. a ``PackedLoader`` of the
            validation split); evaluated every ``config.eval_every`` steps and at the end.
        loss_fn: ``loss_fn(model, batch, key) -> (loss_sum, aux)`` (see :mod:`zoo_train._loss`);
            default :func:`make_lm_loss` with ``config.z_loss`` and ``config.compute_dtype``.
        trainable: an ``eqx.partition`` filter choosing the trained arrays (default: every
            floating-point array); the rest is frozen but still checkpointed.
        run_info: JSON-ready facts about the run (e.g. the model configuration); stored in
            checkpoints and required to match on resume.
        stop_at: end this call after this step (checkpointed), e.g. to split a run over jobs.
        on_record: called with every metrics record as it is written.
        mesh: the device mesh; default ``make_mesh(config.mesh)``.
        start_info: JSON-ready facts written into the start (or resume) record of the
            metrics, not compared on resume (e.g. parameter counts).

    Returns:
        A :class:`TrainResult`.

    Raises:
        CheckpointMismatchError: ``out`` holds checkpoints of a different configuration, data
            or model; nothing is overwritten.
        NoUsableCheckpointError: ``out`` holds checkpoints but none is readable.
        RunLockedError: another process is training into ``out`` (held for the whole call).
        NonFiniteLossError: a NaN/inf loss with ``on_nonfinite="stop"``; the last good checkpoint
            is kept.
    """
    if stop_at is not None and not 1 <= stop_at <= config.steps:
        raise ValueError(f"`stop_at` must be in [1, steps={config.steps}], got {stop_at}.")
    end = config.steps if stop_at is None else stop_at
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows_per_step = config.batch_size * config.grad_accum

    mesh = make_mesh(config.mesh) if mesh is None else mesh
    rules = make_rules(config.sharding)
    check_batch(config.batch_size, mesh, rules)
    compute_dtype = resolve_compute_dtype(config.compute_dtype, platform_of(mesh))
    if loss_fn is None:
        loss_fn = make_lm_loss(z_loss=config.z_loss, compute_dtype=compute_dtype)
    plan = plan_state(model, config, mesh, rules, trainable=trainable)
    model_config = getattr(plan.abstract_model, "config", None)
    if hasattr(model_config, "n_heads") and hasattr(model_config, "kv_heads"):  # a zoo model
        check_heads(model_config.n_heads, model_config.kv_heads, mesh, rules)
    identity = _identity(config, data, run_info)

    def check(meta: dict) -> None:
        diffs = run_changes(meta.get("identity"), identity)
        if meta.get("step", 0) > config.steps:
            diffs.append(f"steps: checkpoint {meta.get('step')} is past {config.steps}")
        if diffs:
            shown = "; ".join(diffs[:4]) + ("; …" if len(diffs) > 4 else "")
            raise CheckpointMismatchError(
                f"The checkpoints in {out / CHECKPOINT_DIR} come from a different run ({shown}); "
                "resume with the same settings or choose a new output directory."
            )

    checkpointer = Checkpointer(
        out / CHECKPOINT_DIR, keep=config.keep, async_save=config.async_checkpointing
    )
    writer: MetricsWriter | None = None
    progress: Progress | None = None
    feed: Prefetcher | None = None
    exits = contextlib.ExitStack()
    stop = exits.enter_context(stop_requests())
    profile_steps = config.profile
    profile = ProfileWindow(profile_steps, out, last=end, enabled=is_primary())
    try:
        # The template is abstract: resuming builds no model at all.
        restored = checkpointer.restore(plan.template, check=check)
        start = 0
        skipped_reports: list[str] = []
        if restored is not None:
            state, start, skipped_reports = restored.state, restored.step, restored.skipped
            data.load_state_dict(restored.meta["data_state"])
        elif is_builder(model):
            state = init_sharded(lambda: plan.fresh(model()), mesh=mesh, shardings=plan.shardings)
        else:
            state = init_sharded(plan.fresh, model, mesh=mesh, shardings=plan.shardings)
        # One writer: process 0 alone writes metrics, the plot and what a user reads; every
        # process computes the same values and joins every collective and checkpoint save.
        primary = is_primary()
        if primary:
            writer = MetricsWriter(out / METRICS_FILE)
            writer.truncate_after(start)

        def record(rec: dict[str, Any]) -> None:
            if writer is not None:
                writer.write(rec)
            if on_record is not None and primary:
                on_record(rec)

        train_step = make_train_step(
            plan.optimizer,
            loss_fn,
            plan.schedule,
            grad_accum=config.grad_accum,
            mesh=mesh,
            rules=rules,
            packed_metrics=True,
        )
        eval_step = make_eval_step(loss_fn, mesh=mesh, rules=rules, optimizer=plan.optimizer)

        # Trace the loss once (abstractly, under the mesh) so the attention kernel is resolved
        # for the target and logged first.
        zoo_attention.clear_resolutions()
        step_rows = BatchLayout(mesh, rules, rows_per_step)
        eval_rows = BatchLayout(mesh, rules, config.batch_size)
        next_batch = batch_reader(data, step_rows)
        # One batch even for a finished run: its shapes trace the loss and resolve the kernel.
        feed = Prefetcher(lambda: (next_batch(), data.state_dict()), max(end - start, 1))
        batch, data_state = feed.next()
        shapes = batch.shapes() if isinstance(batch, PackedBatch) else batch
        micro = {
            k: jax.ShapeDtypeStruct((config.batch_size, *v.shape[1:]), v.dtype)
            for k, v in shapes.items()
        }
        with jax.set_mesh(mesh), zoo_layers.axis_rules(rules):
            eqx.filter_eval_shape(loss_fn, state.model, micro, jax.random.key(0))
        kernels = attention_resolutions()
        label = kernel_label(kernels)
        prov = provenance()
        layout = mesh_record(mesh)
        progress = Progress(
            config.steps,
            start,
            enabled=config.progress and primary,
            quiet=not primary,
        )
        progress.write(
            f"zoo-train: {'resuming from step ' + str(start) if restored else 'starting'}"
            f" → step {end}; attention kernel: {label}; mesh {describe_mesh(mesh)}"
        )
        mesh_change = _mesh_change(restored.meta.get("mesh"), layout) if restored else None
        if mesh_change is not None:
            progress.write(f"zoo-train: the mesh changed since checkpoint {start}: {mesh_change}")
        extended = steps_change(restored.meta.get("identity"), identity) if restored else None
        extensions = list(restored.meta.get("extensions") or []) if restored else []
        if extended is not None:
            extensions.append({"at_step": start, **extended})
            progress.write(
                f"zoo-train: the run now ends at step {extended['to']} (was {extended['from']}); "
                "the learning-rate schedule follows the new total"
            )
        for report in skipped_reports:
            progress.write(f"zoo-train: {report}")
        logger.info("attention kernel: %s", label)
        record(
            {
                "step": start,
                "event": "resume" if restored else "start",
                "resumed_from": start if restored else None,
                "kernel": label,
                "attention": kernels,
                "skipped_checkpoints": skipped_reports,
                "provenance": prov,
                "mesh": layout,
                "mesh_changed": mesh_change,
                "steps_changed": extended,
                "config": _jsonable(config.to_dict()),
                "compute_dtype": str(compute_dtype),
                "run_info": _jsonable(run_info or {}),
                **_jsonable(start_info or {}),
            }
        )

        meta_base = {
            "identity": identity,
            "config": _jsonable(config.to_dict()),
            "run_info": _jsonable(run_info or {}),
            "provenance": prov,
            "mesh": layout,
            "extensions": extensions,
        }
        prof_meta = {
            "kernel": label,
            "attention": kernels,
            "eval_modules": ["jit_eval_step"],
            "run": str(out),
        }
        tokens_per_step = math.prod(shapes["input_ids"].shape) if "input_ids" in shapes else 0
        last_eval: dict[str, Any] | None = None
        if restored is None and eval_data is not None:  # the curve starts at the untrained model
            last_eval = {
                "step": start,
                **_evaluate(eval_step, state, eval_data, eval_rows, config.eval_batches),
            }
            record(last_eval)
            progress.write(
                f"step {start}: eval loss {last_eval['eval_loss']:.4f}, ppl {last_eval['eval_ppl']:.2f}"
            )
        window = Window(tokens_per_step)
        reporter = _Reporter(
            config,
            end,
            start,
            window,
            progress,
            record,
            checkpointer,
            label=label,
            skipped=int(jax.device_get(state.skipped)),
        )
        reported = StepMetrics(reporter, on_ready=reporter.finished, due=reporter.due)

        def save(step: int, data_state: Any, evaluated: dict[str, float] | None) -> None:
            reported.drain()  # a step is saved only once it is known to be finite
            with host_annotation("checkpoint"):
                checkpointer.save(
                    step,
                    state,
                    {**meta_base, "data_state": data_state, "last_eval": last_eval},
                    eval_loss=None if evaluated is None else evaluated["eval_loss"],
                )

        step = start
        if stop.signum is not None and jax.process_count() == 1:  # before any step ran
            raise StoppedBySignalError(step=step, signum=stop.signum, saved=False)
        while step < end:
            if profile.starts(step + 1):
                reported.drain()
                jax.block_until_ready(state)
                profile.start()
            with step_annotation(step + 1):
                state, metrics = train_step(batch, state)
            step += 1
            step_data_state = data_state  # the loader's position after this step's batch
            if step < end:
                batch, data_state = feed.next()  # made while the device runs
            reported.push(step, metrics)
            if profile.due(step):
                jax.block_until_ready(state)
                capture = profile.after(
                    step, [functools.partial(train_step.hlo, batch, state)], prof_meta
                )
                progress.write(
                    f"zoo-train: profile of steps {profile_steps[0]}–{profile_steps[1]} in "
                    f"{capture}; read it with `zoo profile {out}`"
                )
            evaluated = None
            if eval_data is not None and (
                (config.eval_every and step % config.eval_every == 0) or step == end
            ):
                reported.drain()
                t_eval = time.perf_counter()
                with host_annotation("eval"):
                    evaluated = _evaluate(
                        eval_step, state, eval_data, eval_rows, config.eval_batches
                    )
                last_eval = {"step": step, **evaluated}
                record(last_eval)
                progress.write(
                    f"step {step}: eval loss {evaluated['eval_loss']:.4f}, ppl {evaluated['eval_ppl']:.2f}"
                )
                window.pause(time.perf_counter() - t_eval)  # evaluation is not training time
            saved = step % config.checkpoint_every == 0 or step == end
            if saved:
                save(step, step_data_state, evaluated)
            halt = stop.stop_step(step)
            if halt is not None and step >= halt[0] and step < end:  # SIGTERM, Ctrl-C
                if not saved:
                    save(step, step_data_state, evaluated)
                checkpointer.wait()
                raise StoppedBySignalError(step=step, signum=halt[1], saved=True)
        reported.drain()
        checkpointer.wait()
        progress.close()
        if config.plot and primary:
            plot_loss_curve(read_metrics(out / METRICS_FILE), out / PLOT_FILE)
        return TrainResult(
            state=state,
            step=step,
            start_step=start,
            resumed_from=start if restored else None,
            skipped_checkpoints=skipped_reports,
            last_eval=last_eval,
            out=out,
            checkpoint_steps=checkpointer.steps(),
            best_step=checkpointer.best_step(),
        )
    finally:
        exits.close()
        if feed is not None:
            feed.close()
        profile.close()
        if progress is not None:
            progress.close()
        if writer is not None:
            writer.close()
        checkpointer.close()
