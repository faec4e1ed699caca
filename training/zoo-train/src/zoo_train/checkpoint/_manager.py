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
import logging
import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import equinox as eqx
import jax
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers as ocm

from .._errors import CheckpointMismatchError, CheckpointWriteError, NoUsableCheckpointError
from .._state import TrainState
from ..parallel import is_array_like
from ._agreement import agreed, sync
from ._fingerprints import describe_leaves, fingerprints, fresh_copies, state_leaves
from ._orbax_quiet import quiet_orbax
from ._recovery import move_aside, refuse_if_all_torn, torn_steps, unkept_steps
from ._reports import brief, mismatch, write_failure

logger = logging.getLogger("zoo_train")


def _leaf_name(i: int) -> str:
    return f"a{i:05d}"


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
        self.keep = keep
        self.read_only = read_only
        self.set_aside_reports: list[str] = []
        self._pending: int | None = None  # the step of the last save started
        self._failed = False
        quiet_orbax()
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
        copies = fresh_copies(leaves)
        full_meta = {
            **meta,
            "step": int(step),
            "leaves": describe_leaves(copies, names),
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
            unkept = unkept_steps(self.directory, self.keep)
            raise CheckpointWriteError(
                write_failure(
                    e,
                    self.directory,
                    self._pending if step is None else step,
                    deleting=unkept[0] if unkept else None,
                )
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
            expected = describe_leaves(leaves, names)
            if meta.get("leaves") != expected:
                raise CheckpointMismatchError(
                    mismatch(meta.get("leaves") or [], expected, self.directory)
                )
        except CheckpointMismatchError:
            raise  # the same files say the same to every process
        except Exception as e:
            error = e
        agreed(error)
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
        agreed(error)
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
                    f"checkpoint {step} in {self.directory} is unreadable ({brief(e)}); "
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
                moved = move_aside(self.directory, step)
                if moved is not None:
                    logger.warning("moved unreadable checkpoint %s to %s", *moved)
        sync("zoo-train: unreadable checkpoints set aside")
        self._manager.reload()

    def _set_aside_torn(self) -> None:
        # Before Orbax lists the directory: it would stop at the first torn JSON piece. Every
        # process reads the same files and reaches the same verdict; process 0 alone moves.
        torn = torn_steps(self.directory)
        refuse_if_all_torn(self.directory, torn)
        sync("zoo-train: checkpoints scanned")
        for step, reason in torn.items() if jax.process_index() == 0 else ():
            moved = move_aside(self.directory, step)
            if moved is not None:
                report = (
                    f"checkpoint {step} in {self.directory} is unreadable ({reason}); moved it "
                    f"to {moved[1]} and using the others"
                )
                logger.warning(report)
                self.set_aside_reports.append(report)
        sync("zoo-train: torn checkpoints set aside")

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
