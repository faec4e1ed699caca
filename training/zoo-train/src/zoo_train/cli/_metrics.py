"""``zoo metrics``: a finished run's metrics replayed into TensorBoard or W&B."""

from __future__ import annotations

import argparse
import pathlib
from typing import Any

from .._usage import UsageError

HELP = "replay a run's metrics into TensorBoard or W&B"
DESCRIPTION = (
    "Send the records of RUN/metrics.jsonl (and its loss curve) to TensorBoard or W&B, as "
    "`zoo train --tracker` sends them while training: the same tags at the same steps. "
    "TensorBoard: into RUN/tensorboard (or --logdir DIR); W&B: a new W&B run, in the project, "
    "name and tags the run was given unless the flags say otherwise (WANDB_MODE=offline works)."
)


def add_metrics_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", metavar="RUN", help="a zoo run directory (with metrics.jsonl)")
    p.add_argument(
        "--to", required=True, choices=("tensorboard", "wandb"), help="the tracker to replay into"
    )
    p.add_argument(
        "--logdir", metavar="DIR", help="TensorBoard event files go here (default: RUN/tensorboard)"
    )
    p.add_argument("--wandb-project", metavar="NAME", help="W&B project (default: the run's)")
    p.add_argument("--wandb-name", metavar="NAME", help="W&B run name (default: the run's)")
    p.add_argument("--wandb-tags", nargs="+", metavar="TAG", help="W&B tags (default: the run's)")


def run_metrics(args: argparse.Namespace) -> int:
    from .. import tracking
    from ..loop import METRICS_FILE, read_metrics

    run = pathlib.Path(args.run)
    records = read_metrics(run / METRICS_FILE)
    if not records:
        raise UsageError(f"{str(run)!r} holds no {METRICS_FILE}; pass a zoo run directory.")
    try:
        tracking.tracker_names([args.to])
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if args.to == "tensorboard":
        target = pathlib.Path(args.logdir) if args.logdir else run / tracking.TENSORBOARD_DIR
        if any(target.glob("events.out.tfevents.*")):
            raise UsageError(
                f"{str(target)!r} already holds TensorBoard event files; pass --logdir DIR to "
                "write elsewhere."
            )
        tracker: tracking.Tracker = tracking.TensorBoardTracker(target)
        where = f"TensorBoard event files in {target}"
    else:
        options = _wandb_options(args, records[0].get("settings") or {}, run)
        tracker = tracking.WandbTracker(run, options, keep_id=False)
        where = f"W&B project {options.project!r}"
    try:
        count = tracking.replay(run, [tracker])
    except Exception as e:  # a backend's own error (no key, no network): one sentence
        raise UsageError(f"The {args.to} tracker failed: {_first_line(e)}") from None
    print(f"zoo: {count} records of {run} replayed into {where}.")
    return 0


def _wandb_options(args: argparse.Namespace, settings: dict[str, Any], run: pathlib.Path) -> Any:
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
