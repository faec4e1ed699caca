"""Settings: declared once, as dataclasses, and read from files, ``--set`` and flags.

The run config of the training loop (``TrainConfig``, ``OptimizerConfig``, ``MeshConfig``, in
``_train`` and ``_mesh``) declares each of its settings: default, help, range, flag and key.
The command line's settings (``_run``; GRPO's ``[grpo]`` in ``_grpo``) take those declarations
as they are and add what only the command line has. Each setting's key, type, default and help are read off the classes
(``_fields``), config files and ``--set`` are merged over the defaults (``_resolve``), and the
command line's flags are made from them (``_flags``). Nothing here imports JAX.
"""

from ._fields import Key as Key
from ._fields import flat as flat
from ._fields import keys as keys
from ._flags import add_flags as add_flags
from ._flags import given_flags as given_flags
from ._grpo import GRPOSettings as GRPOSettings
from ._mesh import AXES as AXES
from ._mesh import MeshConfig as MeshConfig
from ._mesh import shown_axes as shown_axes
from ._ranges import Range as Range
from ._ranges import bounded as bounded
from ._resolve import defaults as defaults
from ._resolve import parse_assignment as parse_assignment
from ._resolve import read_config_file as read_config_file
from ._resolve import resolve_settings as resolve_settings
from ._run import OBJECTIVES as OBJECTIVES
from ._run import AttentionSettings as AttentionSettings
from ._run import EvalHarnessSettings as EvalHarnessSettings
from ._run import FinetuneSettings as FinetuneSettings
from ._run import LoRASettings as LoRASettings
from ._run import OptimizerSettings as OptimizerSettings
from ._run import RunSettings as RunSettings
from ._run import WandbSettings as WandbSettings
from ._run import finetune_defaults as finetune_defaults
from ._train import MAX_STEPS as MAX_STEPS
from ._train import SEEDS as SEEDS
from ._train import WARMUP_FLOOR as WARMUP_FLOOR
from ._train import LoopSettings as LoopSettings
from ._train import OptimizerChoice as OptimizerChoice
from ._train import OptimizerConfig as OptimizerConfig
from ._train import TrainConfig as TrainConfig
from ._train import default_warmup as default_warmup
