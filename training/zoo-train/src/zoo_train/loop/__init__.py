"""The training loop: ``train`` starts a run (restoring or initialising it), takes its steps and
finishes it; evaluation, checkpoints, the profile window and stop requests are hooks called at
their intervals between steps; progress and metrics are reported as steps finish."""

from ..checkpoint import CHECKPOINT_DIR as CHECKPOINT_DIR
from ._evaluate import EvalData as EvalData
from ._evaluate import evaluate as evaluate
from ._hooks import Hooks as Hooks
from ._metrics import METRICS_FILE as METRICS_FILE
from ._metrics import PLOT_FILE as PLOT_FILE
from ._metrics import MetricsWriter as MetricsWriter
from ._metrics import plot_loss_curve as plot_loss_curve
from ._metrics import read_metrics as read_metrics
from ._prefetch import Prefetcher as Prefetcher
from ._progress import Progress as Progress
from ._progress import epochs_text as epochs_text
from ._progress import rows_per_epoch as rows_per_epoch
from ._reporter import Reporter as Reporter
from ._result import EvalSource as EvalSource
from ._result import TrainResult as TrainResult
from ._spec import TrainSpec as TrainSpec
from ._start import Position as Position
from ._start import Run as Run
from ._step_end import LoopView as LoopView
from ._step_end import StepEnd as StepEnd
from ._stop import StopRequest as StopRequest
from ._stop import pending_signal as pending_signal
from ._stop import stop_requests as stop_requests
from ._train import run_training as run_training
from ._train import train as train
