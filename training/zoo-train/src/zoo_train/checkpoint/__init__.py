"""Checkpoints of a run: the Orbax manager, agreement between processes, recovery of torn or
unreadable steps, and the lock that keeps one training process per output directory."""

from ._fingerprints import fingerprints as fingerprints
from ._fingerprints import state_leaves as state_leaves
from ._fingerprints import to_numpy_tree as to_numpy_tree
from ._lock import LOCK_FILE as LOCK_FILE
from ._lock import holds_run_lock as holds_run_lock
from ._lock import run_lock as run_lock
from ._manager import Checkpointer as Checkpointer
from ._manager import Restored as Restored
from ._recovery import torn_steps as torn_steps

#: The directory of a run that holds its checkpoints.
CHECKPOINT_DIR = "checkpoints"
