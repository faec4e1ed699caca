"""``train``: the loop. It starts (restoring or initialising), takes steps, and finishes; what
happens between steps is done by hooks (:mod:`._hooks`)."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.sharding import Mesh
from jaxtyping import PyTree

from zoo_data import DataSource

from .._config import TrainConfig
from .._errors import StepInterruptedError, StoppedBySignalError
from .._loss import LossFn
from ..checkpoint import run_lock
from ..parallel import is_primary
from ..profile import step_annotation
from ..program import StepSpec
from ._evaluate import EvalData
from ._hooks import standard_hooks, stop_before_step
from ._metrics import METRICS_FILE, PLOT_FILE, plot_loss_curve, read_metrics
from ._result import TrainResult
from ._spec import TrainSpec
from ._start import Run, start_run
from ._step_end import LoopView, StepEnd


def train(
    model: PyTree,
    data: DataSource,
    *,
    config: TrainConfig,
    out: str | pathlib.Path,
    eval_data: EvalData | None = None,
    loss_fn: LossFn | None = None,
    trainable: Callable[[Any], bool] | PyTree[bool] | None = None,
    run_info: dict[str, Any] | None = None,
    stop_at: int | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
    mesh: Mesh | None = None,
    start_info: dict[str, Any] | None = None,
    hooks: Sequence[tuple[Callable[[StepEnd], None], int | None]] = (),
    rollout: Any = None,
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
        data: a :class:`~zoo_data.DataSource` (e.g. :class:`~zoo_data.PackedLoader`);
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
        hooks: ``(fn, every)`` pairs run after the standard hooks: ``fn(StepEnd)`` after every
            ``every``-th step and the last (``None``: every step).
        rollout: ``rollout(model, step, rows) -> batch``, each step's batch made from the
            data's rows with the model being trained (GRPO's :class:`~zoo_train.grpo.Rollout`);
            raising :class:`~zoo_train.StepInterruptedError` (a stop signal while it waited) saves
            the last step taken and stops as a signal after a step does.

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
    spec = TrainSpec(
        step=StepSpec(model, config, loss_fn=loss_fn, trainable=trainable, mesh=mesh),
        data=data,
        out=pathlib.Path(out),
        eval_data=eval_data,
        run_info=run_info,
        stop_at=stop_at,
        on_record=on_record,
        start_info=start_info,
        hooks=tuple(hooks),
        rollout=rollout,
    )
    return run_training(spec)


def run_training(spec: TrainSpec) -> TrainResult:
    """The loop of :func:`train` on one :class:`TrainSpec`: start, take steps with the hooks
    between them, finish. Process 0 holds the output directory's run lock throughout (one
    lock per directory however many processes write it)."""
    with run_lock(spec.out, enabled=is_primary()), contextlib.ExitStack() as resources:
        run = start_run(spec, resources)
        between_steps = standard_hooks(run, spec.eval_data)
        view = loop_view(run)
        for fn, every in spec.hooks:
            between_steps.add(fn, every=every)
        if run.stop.signum is not None and jax.process_count() == 1:  # before any step ran
            raise StoppedBySignalError(step=run.start, signum=run.stop.signum, saved=False)
        for fn, _ in spec.hooks:
            # A hook object may act once before this call's first step (on the model it
            # starts from: at step 0, the untrained one).
            start = getattr(fn, "start", None)
            if callable(start) and run.now.step < run.end:
                start(view, run.now.step)
        last: StepEnd | None = None
        while run.now.step < run.end:
            between_steps.before_step(run.now.step + 1)
            try:
                end = take_step(run)
            except StepInterruptedError as stop:  # a signal while the batch was made (a reward)
                stop_before_step(run, last, stop.signum)
            end.view = view
            between_steps.after_step(end)
            last = end
        return finish(run)


def loop_view(run: Run) -> LoopView:
    """What the hooks may use of ``run``."""
    program = run.program
    return LoopView(
        out=run.out,
        model=lambda: run.now.state.model,
        record=run.record,
        drain=run.metrics.drain,
        write=run.progress.write,
        pause=run.window.pause,
        mesh=program.mesh,
        rules=program.rules,
    )


def take_step(run: Run) -> StepEnd:
    """Dispatch the next step, then make the batch after it while the device runs."""
    now = run.now
    batch = now.batch
    if run.rollout is not None:  # sampled from the parameters before this step's update
        batch = run.rollout(now.state.model, now.step + 1, batch)
    with step_annotation(now.step + 1):
        now.state, metrics = run.train_step(batch, now.state)
    now.step += 1
    end = StepEnd(now.step, data_state=now.data_state)  # the loader's position after this batch
    if now.step < run.end:
        now.batch, now.data_state = run.feed.next()
    run.metrics.push(now.step, metrics)
    return end


def finish(run: Run) -> TrainResult:
    """Read the last metrics, wait for the saves, plot the curve; the result."""
    run.metrics.drain()
    run.checkpointer.wait()
    run.progress.close()
    if run.config.plot and is_primary():
        plot_loss_curve(read_metrics(run.out / METRICS_FILE), run.out / PLOT_FILE)
    return TrainResult(
        state=run.now.state,
        step=run.now.step,
        start_step=run.start,
        resumed_from=run.start if run.resumed else None,
        skipped_checkpoints=run.skipped,
        last_eval=run.now.last_eval,
        out=run.out,
        checkpoint_steps=run.checkpointer.steps(),
        best_step=run.checkpointer.best_step(),
    )
