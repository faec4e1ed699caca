"""Orbax checkpoints of a ``TrainState`` plus JSON metadata, verified on restore.

Layout of ``<out>/checkpoints/<step>/``:

- ``state/``: the state's arrays as a flat dict ``{"a00000": …}`` (leaf order of
  ``jax.tree.leaves(eqx.filter(state, eqx.is_array))``), written by ``StandardSave``;
- ``meta/``: JSON: ``step``, ``leaves`` (path, shape, dtype per array), ``fingerprints``
  (a uint32 checksum per array), and whatever the caller adds (loader position, config,
  provenance);
- ``metrics/``: ``{"eval_loss": …}`` when the step was evaluated (ranks the best checkpoint).

Orbax writes each step into a temporary directory and renames it on commit, so a killed save
leaves no step directory; a step that is present but unreadable or fails its checksums is
reported and the previous one is used. Orbax parses every step's small JSON files (its commit
record, ``metrics/``) whenever it lists the directory, so one torn file anywhere would stop it
listing any step: a writer moves such a step aside first, with a report; a reader
(``read_only=True``) does not list them at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as ocm

from ._errors import CheckpointMismatchError, CheckpointWriteError, NoUsableCheckpointError
from ._state import TrainState
from .parallel import is_array_like

logger = logging.getLogger("zoo_train")


class _QuietUnevaluatedSaves(logging.Filter):
    # Orbax warns on every save without metrics when a best_fn is set; most saves are unevaluated.
    def filter(self, record: logging.LogRecord) -> bool:
        return "did not provide metrics" not in record.getMessage()


logging.getLogger("absl").addFilter(_QuietUnevaluatedSaves())


def _leaf_name(i: int) -> str:
    return f"a{i:05d}"


def _bits(x: jax.Array) -> jax.Array:
    x = jnp.ravel(x)
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32)
    size = x.dtype.itemsize
    if size == 4:
        return jax.lax.bitcast_convert_type(x, jnp.uint32)
    if size == 8:
        return jnp.ravel(jax.lax.bitcast_convert_type(x, jnp.uint32))
    narrow = {2: jnp.uint16, 1: jnp.uint8}[size]
    return jax.lax.bitcast_convert_type(x, narrow).astype(jnp.uint32)


@jax.jit
def _fingerprints(leaves: list[jax.Array]) -> list[jax.Array]:
    # A position-sensitive checksum that wraps mod 2**32: catches zero-filled or shuffled chunks.
    out = []
    for x in leaves:
        b = _bits(x)
        idx = jnp.arange(b.shape[0], dtype=jnp.uint32)
        out.append(jnp.sum((b * jnp.uint32(0x9E3779B1)) ^ (idx * jnp.uint32(0x85EBCA77) + 1)))
    return out


@jax.jit
def _copy(leaves: list[jax.Array]) -> list[jax.Array]:
    # Fresh buffers for the background writer: the train step donates the live ones.
    return [jnp.copy(x) for x in leaves]


def fingerprints(leaves: list[jax.Array]) -> list[int]:
    """One uint32 checksum per array (as Python ints)."""
    if not leaves:
        return []
    return [int(v) for v in jax.device_get(_fingerprints(list(leaves)))]


def state_leaves(state: TrainState) -> tuple[list[jax.Array], list[str]]:
    """The state's arrays (or ``ShapeDtypeStruct``s of an abstract state) and their paths, in a
    fixed order."""
    with_path = jax.tree_util.tree_flatten_with_path(eqx.filter(state, is_array_like))[0]
    return [leaf for _, leaf in with_path], [jax.tree_util.keystr(p) for p, _ in with_path]


def _describe(leaves: list[jax.Array], names: list[str]) -> list[list[Any]]:
    return [[n, list(x.shape), str(x.dtype)] for n, x in zip(names, leaves, strict=True)]


@dataclasses.dataclass
class Restored:
    """A restored checkpoint: the state, its metadata, and what was skipped to get it."""

    step: int
    state: TrainState
    meta: dict[str, Any]
    skipped: list[str]


class Checkpointer:
    """Saves and restores ``TrainState`` checkpoints under ``directory``.

    Keeps the ``keep`` most recent checkpoints plus the one with the lowest ``eval_loss``.
    Saves are asynchronous by default; :meth:`wait` blocks until they are committed.
    """

    def __init__(
        self,
        directory: str | pathlib.Path,
        *,
        keep: int = 3,
        async_save: bool = True,
        read_only: bool = False,
    ):
        """Open (``read_only=False``: create) the checkpoint directory ``directory``.

        A reader (``read_only=True``) writes, moves and deletes nothing, so it can read a run
        that is training; it lists steps once, here, and does not rank them (no
        :meth:`best_step`). A writer first moves aside every step with a torn JSON piece,
        reported in :attr:`set_aside_reports` and in the next :meth:`restore`'s ``skipped``.
        """
        self.directory = pathlib.Path(directory).absolute()
        self.read_only = read_only
        self.set_aside_reports: list[str] = []
        self._pending: int | None = None  # the step of the last save started
        self._failed = False
        _quiet_closed_loop_callbacks()
        if read_only:
            self._manager = ocp.CheckpointManager(
                self.directory,
                options=ocp.CheckpointManagerOptions(
                    read_only=True,
                    create=False,
                    cleanup_tmp_directories=False,
                    lightweight_initialize=True,  # no per-step JSON parsed just to list steps
                    enable_async_checkpointing=False,
                ),
                item_names=("state", "meta"),
            )
            return
        self._set_aside_torn()
        policy = ocm.preservation_policy.AnyPreservationPolicy(
            [
                ocm.preservation_policy.LatestN(n=keep),
                ocm.preservation_policy.BestN(
                    get_metric_fn=lambda m: m["eval_loss"],
                    reverse=True,  # ascending loss reversed: the lowest loss sorts last = kept
                    n=1,
                    keep_checkpoints_without_metrics=False,
                ),
            ]
        )
        options = ocp.CheckpointManagerOptions(
            best_fn=lambda m: m["eval_loss"],
            best_mode="min",
            preservation_policy=policy,
            enable_async_checkpointing=async_save,
            cleanup_tmp_directories=True,
            create=True,
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options, item_names=("state", "meta")
        )

    def steps(self) -> list[int]:
        """Committed steps, ascending (a reader's: as listed when it was opened)."""
        if not self.read_only:
            self._manager.reload()
        return sorted(self._manager.all_steps())

    def latest_step(self) -> int | None:
        """The newest committed step, or ``None``."""
        steps = self.steps()
        return steps[-1] if steps else None

    def best_step(self) -> int | None:
        """The committed step with the lowest ``eval_loss`` (``None`` if none was evaluated)."""
        self._manager.reload()
        best = self._manager.best_step()
        return best if best is not None and self._manager.metrics(best) is not None else None

    def save(
        self,
        step: int,
        state: TrainState,
        meta: dict[str, Any],
        *,
        eval_loss: float | None = None,
    ) -> None:
        """Start saving ``state`` at ``step`` (returns once the arrays are copied on device)."""
        leaves, names = state_leaves(state)
        copies = _copy(leaves)
        full_meta = {
            **meta,
            "step": int(step),
            "leaves": _describe(copies, names),
            "fingerprints": fingerprints(copies),
        }
        metrics = None if eval_loss is None else {"eval_loss": float(eval_loss)}
        with self._writing(int(step)):  # also reports the failure of the previous async save
            self._manager.save(
                int(step),
                args=ocp.args.Composite(
                    state=ocp.args.StandardSave({_leaf_name(i): x for i, x in enumerate(copies)}),
                    meta=ocp.args.JsonSave(full_meta),
                ),
                metrics=metrics,
                force=True,
            )
        self._pending = int(step)

    @contextlib.contextmanager
    def _writing(self, step: int | None) -> Iterator[None]:
        """Turn a failed write (a save, the async save before it, a deletion on rotation) into
        one :class:`CheckpointWriteError` sentence; later calls (``close`` after a failure)
        raise nothing more."""
        if self._failed and step is None:  # waiting after a reported failure: nothing to add
            with contextlib.suppress(Exception):
                yield
            return
        try:
            yield
        except Exception as e:
            self._failed = True
            raise CheckpointWriteError(
                _write_failure(e, self.directory, self._pending if step is None else step)
            ) from e

    def read_meta(self, step: int) -> dict[str, Any]:
        """The JSON metadata of ``step``."""
        return dict(
            self._manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())).meta
        )

    def restore_step(
        self, step: int, template: TrainState, *, check: Callable[[dict], None] | None = None
    ) -> Restored:
        """Restore exactly ``step`` (no fallback); raises if it is unreadable or fails checks."""
        return self._restore_step(step, template, check)

    def _restore_step(
        self, step: int, template: TrainState, check: Callable[[dict], None] | None
    ) -> Restored:
        # Each phase ends with every process agreeing it succeeded before any of them goes on
        # to work the others must join (reading shards, the checksum computation).
        error: Exception | None = None
        try:
            meta = self.read_meta(step)
            if meta.get("step") != step:
                raise ValueError(f"its metadata names step {meta.get('step')}")
            if check is not None:
                check(meta)
            leaves, names = state_leaves(template)
            expected = _describe(leaves, names)
            if meta.get("leaves") != expected:
                raise CheckpointMismatchError(
                    _mismatch(meta.get("leaves") or [], expected, self.directory)
                )
        except CheckpointMismatchError:
            raise  # the same files say the same to every process
        except Exception as e:
            error = e
        _agreed(error)
        abstract = {
            _leaf_name(i): jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
            for i, x in enumerate(leaves)
        }
        try:
            restored = self._manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
            ).state
            arrays = [restored[_leaf_name(i)] for i in range(len(leaves))]
        except Exception as e:
            error = e
        _agreed(error)
        if fingerprints(arrays) != meta.get("fingerprints"):
            raise ValueError("its arrays fail their checksums")
        structure = jax.tree.structure(eqx.filter(template, is_array_like))
        static = eqx.filter(template, is_array_like, inverse=True)
        state = eqx.combine(jax.tree.unflatten(structure, arrays), static)
        return Restored(step=step, state=state, meta=meta, skipped=[])

    def restore(
        self, template: TrainState, *, check: Callable[[dict], None] | None = None
    ) -> Restored | None:
        """Restore the newest readable checkpoint into the structure of ``template``.

        Args:
            template: a state of the same structure, concrete or abstract (``ShapeDtypeStruct``
                leaves); its values are not used, its leaves' shardings place the restored
                arrays (so a checkpoint saved on one mesh restores onto another).
            check: called with each candidate's metadata before its arrays are read; raise
                :class:`CheckpointMismatchError` to refuse the directory.

        Returns:
            ``None`` if there are no checkpoints; else the restored state. A checkpoint that
            cannot be read or fails its checksums is logged, listed in ``skipped``, and the
            previous one tried; unreadable steps newer than the restored one are moved to
            ``<directory>-unreadable/`` (never deleted) so the run can save those steps again.

        Raises:
            CheckpointMismatchError: the checkpoints belong to a different run or model.
            NoUsableCheckpointError: checkpoints exist but none is readable.
        """
        skipped: list[str] = list(self.set_aside_reports)
        self.set_aside_reports = []
        steps = self.steps()
        for step in reversed(steps):
            try:
                restored = self._restore_step(step, template, check)
            except CheckpointMismatchError:
                raise
            except Exception as e:  # a torn or corrupt step: report it and use the previous one
                reason = (
                    f"checkpoint {step} in {self.directory} is unreadable ({_brief(e)}); "
                    "using the previous one"
                )
                logger.warning(reason)
                skipped.append(reason)
                continue
            restored.skipped = skipped
            if not self.read_only:
                self._set_aside([s for s in steps if s > step])
            return restored
        if steps:
            raise NoUsableCheckpointError(
                f"None of the checkpoints {steps} in {self.directory} can be read ({'; '.join(skipped)}); "
                "move them away or pick another output directory (they are never overwritten)."
            )
        return None

    def _set_aside(self, steps: list[int]) -> None:
        # Unreadable steps newer than the restored one would block re-saving those steps; they
        # are moved (never deleted) to <directory>-unreadable/ for inspection. Every process
        # agreed they are unreadable; process 0 alone moves them, the others wait for it.
        if not steps:
            return
        if jax.process_index() == 0:
            for step in steps:
                moved = _move_aside(self.directory, step)
                if moved is not None:
                    logger.warning("moved unreadable checkpoint %s to %s", *moved)
        _sync("zoo-train: unreadable checkpoints set aside")
        self._manager.reload()

    def _set_aside_torn(self) -> None:
        # Before Orbax lists the directory: it would stop at the first torn JSON piece. Every
        # process reads the same files and reaches the same verdict; process 0 alone moves.
        torn = torn_steps(self.directory)
        if torn and len(torn) == len(_step_dirs(self.directory)):
            raise NoUsableCheckpointError(
                f"None of the checkpoints {sorted(torn)} in {self.directory} can be read "
                f"({'; '.join(f'{s}: {r}' for s, r in sorted(torn.items()))}); move them "
                "away or pick another output directory (they are never overwritten)."
            )
        _sync("zoo-train: checkpoints scanned")
        for step, reason in torn.items() if jax.process_index() == 0 else ():
            moved = _move_aside(self.directory, step)
            if moved is not None:
                report = (
                    f"checkpoint {step} in {self.directory} is unreadable ({reason}); moved it "
                    f"to {moved[1]} and using the others"
                )
                logger.warning(report)
                self.set_aside_reports.append(report)
        _sync("zoo-train: torn checkpoints set aside")

    def wait(self) -> None:
        """Block until every started save is committed.

        Raises:
            CheckpointWriteError: a save failed (e.g. the disk is full); the committed
                checkpoints before it are intact.
        """
        with self._writing(None):
            self._manager.wait_until_finished()

    def close(self) -> None:
        """Wait for saves and release the manager's resources (a failed save raises here, once:
        not again if :meth:`wait` or :meth:`save` already reported it)."""
        try:
            self.wait()
        finally:
            with contextlib.suppress(Exception) if self._failed else contextlib.nullcontext():
                self._manager.close()


# The JSON files of a step that Orbax parses to list steps (its commit record, the metrics that
# rank them). A torn ``meta/`` or array is found when that step is restored.
_JSON_PIECES = ("_CHECKPOINT_METADATA", "metrics/metrics")


def _step_dirs(directory: pathlib.Path) -> list[pathlib.Path]:
    if not directory.is_dir():
        return []
    return [p for p in directory.iterdir() if p.name.isdigit() and p.is_dir()]


def torn_steps(directory: pathlib.Path) -> dict[int, str]:
    """``{step: reason}`` for the committed steps under ``directory`` with a JSON piece that
    cannot be read or parsed (absent pieces are fine: unevaluated steps have no metrics)."""
    torn: dict[int, str] = {}
    for step_dir in _step_dirs(directory):
        for piece in _JSON_PIECES:
            path = step_dir / piece
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError included
                torn[int(step_dir.name)] = f"{piece}: {_brief(e)}"
                break
    return torn


def _move_aside(directory: pathlib.Path, step: int) -> tuple[pathlib.Path, pathlib.Path] | None:
    """Move step ``step`` to ``<directory>-unreadable/<step>-<time>``; ``(from, to)``, or
    ``None`` if it is gone."""
    src = directory / str(step)
    if not src.exists():
        return None
    aside = directory.with_name(directory.name + "-unreadable")
    aside.mkdir(exist_ok=True)
    dst = aside / f"{step}-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.move(str(src), str(dst))
    return src, dst


def _sync(name: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _agreed(error: Exception | None) -> None:
    """Raise unless every process got through a phase: ``error`` (this process's), or a note
    that another process failed. Every process reaches the same verdict."""
    ok = error is None
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        ok = bool(np.all(multihost_utils.process_allgather(np.asarray(ok))))
    if error is not None:
        raise error
    if not ok:
        raise ValueError("another process could not read it")


def _write_failure(error: Exception, directory: pathlib.Path, step: int | None) -> str:
    # TensorStore reports an OS error inside a long message: "... [os_error_code='28']".
    code = re.search(r"os_error_code='(\d+)'", str(error))
    if code is not None:
        reason = os.strerror(int(code.group(1))).lower()
    elif isinstance(error, OSError) and error.strerror:
        reason = error.strerror.lower()
    else:
        reason = _brief(error)
    deleting = _deleting_step(error)
    if deleting is not None:
        return (
            f"Deleting checkpoint {deleting} in {directory} (beyond the `keep` newest) failed: "
            f"{reason}; the newer checkpoints are committed, so remove it by hand or fix the "
            "directory, then run again."
        )
    # An async save's failure surfaces at the next call: the path in the message names its step.
    named = re.search(r"/(\d+)\.orbax-checkpoint-tmp", str(error))
    step = int(named.group(1)) if named is not None else step
    what = f"checkpoint {step}" if step is not None else "a checkpoint"
    return (
        f"Writing {what} in {directory} failed: {reason}; free space or fix the directory, "
        "then run again to resume from the last committed checkpoint."
    )


def _deleting_step(error: BaseException) -> int | None:
    """The step Orbax's deleter was removing when ``error`` was raised, if it was (the error
    itself, an OSError from ``rmtree``, does not say)."""
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        step = frame.f_locals.get("step")
        in_deleter = frame.f_code.co_name == "delete" and "deleter" in frame.f_code.co_filename
        if in_deleter and isinstance(step, int):
            return step
        tb = tb.tb_next
    return None


def _quiet_closed_loop_callbacks() -> None:
    """Drop the "Event loop is closed" errors that follow a failed Orbax read or write.

    Orbax runs each restore on an event loop of its own and closes it when a read fails; reads
    of the other arrays still in flight in TensorStore then complete onto the closed loop, and
    Python prints each callback's ``RuntimeError`` as an unraisable exception, dozens of
    tracebacks after a one-line report. Nothing is lost (the step is reported and skipped);
    only exactly that error is dropped, everything else reaches the previous hook.
    """
    previous = sys.unraisablehook
    if getattr(previous, "_zoo_closed_loop_filter", False):
        return

    def hook(unraisable: Any) -> None:
        error = unraisable.exc_value
        closed = isinstance(error, RuntimeError) and str(error) == "Event loop is closed"
        if not (closed and unraisable.object is None):
            previous(unraisable)

    hook._zoo_closed_loop_filter = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def _brief(error: Exception) -> str:
    # Storage errors carry whole tensorstore specs; the first clause says what went wrong.
    text = str(error).splitlines()[0] if str(error) else ""
    text = text.split(" [tensorstore_spec")[0]
    return f"{type(error).__name__}: {text[:300]}{'…' if len(text) > 300 else ''}"


def _mismatch(saved: list, expected: list, directory: pathlib.Path) -> str:
    saved_d = {n: (s, d) for n, s, d in saved}
    want_d = {n: (s, d) for n, s, d in expected}
    diffs = [n for n in sorted(set(saved_d) | set(want_d)) if saved_d.get(n) != want_d.get(n)]
    shown = ", ".join(f"{n}: saved {saved_d.get(n)} vs now {want_d.get(n)}" for n in diffs[:3])
    return (
        f"The checkpoints in {directory} hold a different model or optimizer ({shown}"
        f"{', …' if len(diffs) > 3 else ''}); use another output directory or the original setup."
    )


def to_numpy_tree(tree: Any) -> Any:
    """Copy every array leaf of ``tree`` to host numpy (for exact comparisons)."""
    return jax.tree.map(lambda x: np.asarray(x) if eqx.is_array(x) else x, tree)
