"""``zoo metrics``: a run's summary and curves in the terminal, or its metrics replayed into
TensorBoard or W&B."""

from __future__ import annotations

import argparse
import pathlib
import shutil
from typing import Any

from .._metrics_summary import summary_lines
from .._usage import UsageError

# Where a replay into the run's own TensorBoard folder is written before it replaces the old.
_REPLACING = ".tensorboard-replay"


def add_metrics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="a zoo run directory (with metrics.jsonl)")
    p.add_argument(
        "--to",
        choices=("tensorboard", "wandb"),
        help="the tracker to replay into (default: print the summary and curves)",
    )
    p.add_argument(
        "--logdir", metavar="DIR", help="TensorBoard event files go here (default: RUN/tensorboard)"
    )
    p.add_argument("--wandb-project", metavar="NAME", help="W&B project (default: the run's)")
    p.add_argument("--wandb-name", metavar="NAME", help="W&B run name (default: the run's)")
    p.add_argument("--wandb-tags", nargs="+", metavar="TAG", help="W&B tags (default: the run's)")


def run_metrics(args: argparse.Namespace) -> int:
    # The tracking and loop packages load JAX: not on the `zoo metrics --help` path.
    from .. import tracking
    from ..loop import METRICS_FILE, read_metrics

    run = pathlib.Path(args.run)
    if not run.exists():
        raise UsageError(f"{str(run)!r} does not exist; pass a zoo run directory.")
    if not run.is_dir():
        raise UsageError(f"{str(run)!r} is not a directory; pass a zoo run directory.")
    records = read_metrics(run / METRICS_FILE)
    if not records:
        raise UsageError(f"{str(run)!r} holds no {METRICS_FILE}; pass a zoo run directory.")
    if args.to is None:
        print("\n".join(summary_lines(run, records)))
        return 0
    try:
        tracking.tracker_names([args.to])
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if args.to == "tensorboard":
        return _to_tensorboard(run, args.logdir)
    options = _wandb_options(args, records[0].get("settings") or {}, run)
    tracker = tracking.WandbTracker(run, options, keep_id=False)
    count = _replay(run, tracker, "wandb")
    print(f"zoo: {count} records of {run} replayed into W&B project {options.project!r}.")
    return 0


def _to_tensorboard(run: pathlib.Path, logdir: str | None) -> int:
    """Replay into ``logdir`` (default: the run's own folder) unless the same events are there;
    the run's own stale or partial events are replaced, another folder's are refused."""
    # The tracking package loads JAX: not on the `zoo metrics --help` path.
    from .. import tracking
    from ..tracking import event_files, run_scalars, same_scalars, shown_scalars

    own = run / tracking.TENSORBOARD_DIR
    target = pathlib.Path(logdir) if logdir else own
    old = event_files(target)
    if old:
        wanted, shown = run_scalars(run), shown_scalars(target)
        if same_scalars(shown, wanted):
            print(
                f"zoo: {target} already holds the events of {run} ({len(wanted):,} scalars, as "
                "metrics.jsonl has them); nothing to replay."
            )
            return 0
        if target.resolve() != own.resolve():
            raise UsageError(
                f"{str(target)!r} already holds other TensorBoard event files; pass an empty "
                "--logdir DIR, or leave it out to write into the run's own folder."
            )
        agree = sum(k in shown and shown[k] == v for k, v in wanted.items())
        others = len(shown.keys() - wanted.keys())
        staging = run / _REPLACING
        shutil.rmtree(staging, ignore_errors=True)
        count = _replay(run, tracking.TensorBoardTracker(staging), "tensorboard")
        for path in old:  # the new set is complete before the old one goes
            path.unlink()
        for path in event_files(staging):
            path.rename(target / path.name)
        shutil.rmtree(staging, ignore_errors=True)
        print(
            f"zoo: {target} held a stale or partial set of events ({agree:,} of the run's "
            f"{len(wanted):,} scalars, {others:,} others); replaced with {count} records of {run}."
        )
        return 0
    count = _replay(run, tracking.TensorBoardTracker(target), "tensorboard")
    print(f"zoo: {count} records of {run} replayed into TensorBoard event files in {target}.")
    return 0


def _replay(run: pathlib.Path, tracker: Any, name: str) -> int:
    # The tracking package loads JAX: not on the `zoo metrics --help` path.
    from .. import tracking

    try:
        return tracking.replay(run, [tracker])
    except Exception as e:  # a backend's own error (no key, no network): one sentence
        raise UsageError(f"The {name} tracker failed: {_first_line(e)}") from None


def _wandb_options(args: argparse.Namespace, settings: dict[str, Any], run: pathlib.Path) -> Any:
    # The tracking package loads JAX: not on the `zoo metrics --help` path.
    from ..tracking import WandbOptions

    tags = args.wandb_tags if args.wandb_tags is not None else settings.get("wandb.tags") or []
    return WandbOptions(
        project=args.wandb_project or settings.get("wandb.project") or WandbOptions.project,
        name=args.wandb_name or settings.get("wandb.name") or run.resolve().name,
        tags=tuple(tags),
    )


def _first_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text[:300]
