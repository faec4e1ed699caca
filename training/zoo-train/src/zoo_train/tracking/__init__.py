"""Trackers: a run's metrics, besides ``metrics.jsonl``, in TensorBoard or W&B, as it trains.

A tracker (:class:`Tracker`: ``start``, ``scalars``, ``text``, ``image``, ``close``) is fed
from the loop's record stream: :class:`Trackers` is an ``on_record`` watcher that hands every
record to its trackers from a background thread, switching off (once reported) any that fails.
:func:`replay` sends a finished run's ``metrics.jsonl`` the same way.
"""

from ._choose import TRACKERS as TRACKERS
from ._choose import make_trackers as make_trackers
from ._choose import open_trackers as open_trackers
from ._choose import tracker_names as tracker_names
from ._fanout import Trackers as Trackers
from ._record_calls import scalars_of as scalars_of
from ._replay import replay as replay
from ._tensorboard import TENSORBOARD_DIR as TENSORBOARD_DIR
from ._tensorboard import TensorBoardTracker as TensorBoardTracker
from ._tensorboard_read import event_files as event_files
from ._tensorboard_read import run_scalars as run_scalars
from ._tensorboard_read import same_scalars as same_scalars
from ._tensorboard_read import shown_scalars as shown_scalars
from ._tracker import RunStart as RunStart
from ._tracker import Tracker as Tracker
from ._wandb import WANDB_ID_FILE as WANDB_ID_FILE
from ._wandb import WandbOptions as WandbOptions
from ._wandb import WandbTracker as WandbTracker
