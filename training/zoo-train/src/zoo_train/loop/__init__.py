"""The training loop: a :class:`Trainer` starts a run (restoring or initialising it), takes its
steps and finishes it; evaluation, checkpoints, the profile window and stop requests are hooks
called at their intervals between steps, before the trainer's own; progress and metrics are
reported as steps finish."""

from typing import Any

from ..checkpoint import CHECKPOINT_DIR as CHECKPOINT_DIR
from ._evaluate import EvalData as EvalData
from ._evaluate import evaluate as evaluate
from ._hook import Hook as Hook
from ._hook import LoopView as LoopView
from ._hook import StepEnd as StepEnd
from ._metrics_file import METRICS_FILE as METRICS_FILE
from ._metrics_file import PLOT_FILE as PLOT_FILE
from ._metrics_file import MetricsWriter as MetricsWriter
from ._metrics_file import plot_loss_curve as plot_loss_curve
from ._metrics_file import read_metrics as read_metrics
from ._prefetch import Prefetcher as Prefetcher
from ._progress import Progress as Progress
from ._progress import epochs_text as epochs_text
from ._progress import rows_per_epoch as rows_per_epoch
from ._reporter import Reporter as Reporter
from ._result import EvalSource as EvalSource
from ._result import TrainResult as TrainResult
from ._rollout_data import RolloutData as RolloutData
from ._standard_hooks import Hooks as Hooks
from ._start import Position as Position
from ._start import Run as Run
from ._stop import StopRequest as StopRequest
from ._stop import pending_signal as pending_signal
from ._stop import stop_requests as stop_requests
from ._trainer import Trainer as Trainer

#: Names kept for one minor release (zoo-train 0.10), each warning when called.
_DEPRECATED = ("TrainSpec", "run_training", "train")


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        from .. import _deprecated

        return getattr(_deprecated, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
