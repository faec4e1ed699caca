"""``Trainer``: the one way to train. It is built from one config, a model (or a function that
builds it), a loss function and an output directory; ``add_hook`` adds what runs between steps;
``train(data)`` starts the run (restoring or initialising it), takes its steps with the hooks
between them, and finishes."""

from __future__ import annotations

import contextlib
import dataclasses
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
from jax.sharding import Mesh
from jaxtyping import PyTree

import zoo_attention
import zoo_layers
from zoo_data import DataSource

from .._errors import StepInterruptedError, StoppedBySignalError
from .._loss import LossFn, loss_unit, make_lm_loss
from .._precision import resolve_compute_dtype
from .._state_plan import plan_state
from .._step import make_eval_step, make_train_step
from ..checkpoint import run_lock
from ..parallel import (
    check_batch,
    check_experts,
    check_heads,
    check_recurrent,
    is_primary,
    make_mesh,
    make_rules,
    platform_of,
)
from ..profile import step_annotation
from ..settings import TrainConfig
from ._evaluate import EvalData
from ._hook import Hook, LoopView, StepEnd
from ._metrics_file import METRICS_FILE, PLOT_FILE, plot_loss_curve, read_metrics
from ._result import TrainResult
from ._standard_hooks import standard_hooks, stop_before_step
from ._start import Run, start_run


class Trainer:
    """Trains ``model`` with ``loss_fn`` by ``config`` into ``out``, resuming what is there.

    The run is laid out on a device mesh (``mesh``, else ``config.mesh`` over every device):
    parameters and optimizer state are sharded by the layers' logical axis names and
    ``config.sharding``, batches split by rows. Building a trainer allocates nothing and
    compiles nothing: it plans the state and makes the jitted steps (``train_step``,
    ``eval_step``), which ``zoo compile`` lowers as they are.

    Args:
        config: the run's settings (:class:`~zoo_train.TrainConfig`).
        model: any Equinox model, or a zero-argument function that builds one: the model is
            then created directly sharded (no full copy on any device), and not at all when
            resuming or compiling ahead of time. With the default loss it is called as
            ``model(input_ids [B,T], *, positions, segment_ids) -> logits [B,T,V]``.
        loss_fn: ``loss_fn(model, batch, key) -> (loss_sum, aux)`` (see
            :data:`~zoo_train.LossFn`); ``None``: :func:`~zoo_train.make_lm_loss` with the
            config's weights and compute dtype.
        out: the output directory: ``metrics.jsonl``, ``loss_curve.png``, ``checkpoints/``
            (``None``: a trainer that only lowers its steps).
        mesh: the device mesh (``None``: ``make_mesh(config.mesh)``).
        trainable: an ``eqx.partition`` filter choosing the trained arrays (``None``: every
            floating-point array); the rest is frozen, holds no optimizer state, and is still
            checkpointed.
        run_info: JSON-ready facts about the run (the model's configuration, say), stored in
            checkpoints and required to match when the run resumes.

    Raises:
        ValueError: the batch, the model's heads or its experts do not split over the mesh.
    """

    def __init__(
        self,
        config: TrainConfig,
        model: PyTree | Callable[[], PyTree],
        loss_fn: LossFn | None = None,
        out: str | pathlib.Path | None = None,
        *,
        mesh: Mesh | None = None,
        trainable: Any = None,
        run_info: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.model = model
        self.out = None if out is None else pathlib.Path(out)
        self.trainable = trainable
        self.run_info = dict(run_info or {})
        self._loss_given = loss_fn
        self._hooks: list[tuple[Hook | Callable[[StepEnd], None], int | None]] = []
        self.mesh = make_mesh(config.mesh) if mesh is None else mesh
        self.rules = make_rules(config.sharding)
        check_batch(config.batch_size, self.mesh, self.rules)
        self.compute_dtype = resolve_compute_dtype(config.compute_dtype, platform_of(self.mesh))
        if loss_fn is None:
            loss_fn = make_lm_loss(
                z_loss=config.z_loss,
                compute_dtype=self.compute_dtype,
                router_aux_loss=config.router_aux_loss,
                router_z_loss=config.router_z_loss,
                # Only a full fine-tune moves the routers' correction biases: a LoRA run's
                # adapters must hold every change to the base.
                balance_routers=trainable is None,
            )
        self.loss_fn = loss_fn
        self.plan = plan_state(model, config, self.mesh, self.rules, trainable=trainable)
        model_config: Any = getattr(self.plan.abstract_model, "config", None)
        if hasattr(model_config, "n_heads") and hasattr(model_config, "kv_heads"):  # a zoo model
            check_heads(model_config.n_heads, model_config.kv_heads, self.mesh, self.rules)
            check_experts(getattr(model_config, "n_experts", 0), self.mesh, self.rules)
            check_recurrent(getattr(model_config, "n_linear_layers", 0), self.mesh, self.rules)
        self.train_step = make_train_step(
            self.plan.optimizer,
            self.loss_fn,
            self.plan.schedule,
            grad_accum=config.grad_accum,
            mesh=self.mesh,
            rules=self.rules,
            packed_metrics=True,
        )
        self.eval_step = make_eval_step(
            self.loss_fn, mesh=self.mesh, rules=self.rules, optimizer=self.plan.optimizer
        )

    @property
    def unit(self) -> str:
        """What the loss's weight counts (``"tokens"``; ``"pairs"`` for preferences)."""
        return loss_unit(self.loss_fn)

    def add_hook(self, hook: Hook | Callable[[StepEnd], None], *, every: int | None = None) -> None:
        """Run ``hook`` between steps, after the standard ones (profile window, evaluation,
        checkpoints, stop requests): after every ``every``-th step and the last (``None``: every
        step; ``0``: the last only). ``hook`` is a :class:`Hook` (an object with an optional
        ``start(view, step)``, called once before a call's first step, and an optional
        ``after_step(end)``) or a plain function ``fn(end)``."""
        self._hooks.append((hook, every))

    def with_batch_size(self, batch_size: int) -> Trainer:
        """The same trainer for a micro-batch of ``batch_size`` rows (its hooks left out)."""
        return Trainer(
            dataclasses.replace(self.config, batch_size=batch_size),
            self.model,
            self._loss_given,
            self.out,
            mesh=self.mesh,
            trainable=self.trainable,
            run_info=self.run_info,
        )

    def resolve_kernels(self, shapes: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
        """Trace the loss once (abstractly, under the mesh) on a micro-batch of the step's
        ``shapes`` so its kernels are resolved for the target and logged; the resolutions by
        kind: ``{"attention": [...], "grouped_matmul": [...], "cross_entropy": [...],
        "linear_attention": [...]}`` (``Resolution.as_dict()`` each; no grouped matmul without
        a mixture of experts, no linear attention without gated DeltaNet layers)."""
        rows = self.config.batch_size
        micro = {k: jax.ShapeDtypeStruct((rows, *v.shape[1:]), v.dtype) for k, v in shapes.items()}
        with (
            zoo_attention.recording() as log,
            jax.set_mesh(self.mesh),
            zoo_layers.axis_rules(self.rules),
        ):
            eqx.filter_eval_shape(self.loss_fn, self.plan.template.model, micro, jax.random.key(0))
        return {
            "attention": [r.as_dict() for r in log],
            "grouped_matmul": [r.as_dict() for r in log.grouped_matmul],
            "cross_entropy": [r.as_dict() for r in log.cross_entropy],
            "linear_attention": [r.as_dict() for r in log.linear_attention],
        }

    def train(
        self,
        data: DataSource,
        eval_data: EvalData | None = None,
        *,
        stop_at: int | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        start_info: Mapping[str, Any] | None = None,
    ) -> TrainResult:
        """Train for ``config.steps`` steps on ``data``, resuming from ``out`` if it holds
        checkpoints. Process 0 holds the output directory's run lock throughout.

        Args:
            data: a :class:`~zoo_data.DataSource`; each step draws ``grad_accum * batch_size``
                rows. A source with ``make_batch(model, step, rows) -> batch`` (and
                ``shapes()``, the batch's fields as abstract arrays) has each step's batch
                made from its rows with the model being trained, before the step's update
                (GRPO's rollouts: :class:`~zoo_train.RolloutData`); one that raises
                :class:`~zoo_train.StepInterruptedError` (a stop signal while it waited) has
                the last step taken saved and the run stopped as after a step.
            eval_data: held-out data with ``eval_batches`` (or several, by name); evaluated
                every ``config.eval_every`` steps and at the end.
            stop_at: end this call after this step (checkpointed), e.g. to split a run over
                jobs.
            on_record: called with every metrics record as it is written.
            start_info: JSON-ready facts for the start (or resume) record, not compared on
                resume (e.g. parameter counts).

        Returns:
            A :class:`~zoo_train.TrainResult`.

        Raises:
            CheckpointMismatchError: ``out`` holds checkpoints of a different configuration,
                data or model; nothing is overwritten.
            NoUsableCheckpointError: ``out`` holds checkpoints but none is readable.
            RunLockedError: another process is training into ``out``.
            NonFiniteLossError: a NaN/inf loss with ``on_nonfinite="stop"``; the last good
                checkpoint is kept.
        """
        if self.out is None:
            raise ValueError("This Trainer has no output directory; pass `out` to train.")
        with run_lock(self.out, enabled=is_primary()), contextlib.ExitStack() as resources:
            run = start_run(self, data, eval_data, resources, stop_at, on_record, start_info)
            between_steps = standard_hooks(run, eval_data)
            view = _view(run)
            for hook, every in self._hooks:
                between_steps.add(_after_step(hook), every=every)
            if run.stop.signum is not None and jax.process_count() == 1:  # before any step ran
                raise StoppedBySignalError(step=run.start, signum=run.stop.signum, saved=False)
            for hook, _ in self._hooks:
                # A hook object may act once before this call's first step (on the model it
                # starts from: at step 0, the untrained one).
                start = getattr(hook, "start", None)
                if callable(start) and run.now.step < run.end:
                    start(view, run.now.step)
            last: StepEnd | None = None
            while run.now.step < run.end:
                between_steps.before_step(run.now.step + 1)
                try:
                    end = _take_step(run)
                except StepInterruptedError as stop:  # a signal while the batch was made
                    stop_before_step(run, last, stop.signum)
                end.view = view
                between_steps.after_step(end)
                last = end
            return _finish(run)


def _after_step(hook: Hook | Callable[[StepEnd], None]) -> Callable[[StepEnd], None]:
    """What runs of ``hook`` after a step: its ``after_step``, or the function itself."""
    after = getattr(hook, "after_step", None)
    if callable(after):
        return after
    if callable(hook):
        return hook
    return lambda end: None  # a hook with only a `start`


def _view(run: Run) -> LoopView:
    """What the hooks may use of ``run``."""
    return LoopView(
        out=run.out,
        model=lambda: run.now.state.model,
        record=run.record,
        drain=run.metrics.drain,
        write=run.progress.write,
        pause=run.window.pause,
        mesh=run.trainer.mesh,
        rules=run.trainer.rules,
    )


def _take_step(run: Run) -> StepEnd:
    """Dispatch the next step, then make the batch after it while the device runs."""
    now = run.now
    batch = now.batch
    if run.make_batch is not None:  # sampled from the parameters before this step's update
        batch = run.make_batch(now.state.model, now.step + 1, batch)
    with step_annotation(now.step + 1):
        now.state, metrics = run.train_step(batch, now.state)
    now.step += 1
    end = StepEnd(now.step, data_state=now.data_state)  # the loader's position after this batch
    if now.step < run.end:
        now.batch, now.data_state = run.feed.next()
    run.metrics.push(now.step, metrics)
    return end


def _finish(run: Run) -> TrainResult:
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
