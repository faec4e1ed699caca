"""Settings: one dataclass per concept, shared by the library and the command line, and read from
files, ``--set`` and flags.

The loop's run config (:class:`TrainConfig`, with :class:`OptimizerConfig` and
:class:`MeshConfig`), GRPO's (:class:`GRPOConfig`) and distillation's (:class:`DistillConfig`)
declare each of their settings once: default, help, range, flag, key, and whether it is part of
the run's identity. The command line's settings (:class:`RunSettings`, :class:`FinetuneSettings`)
extend the run config with what only the command line has. Each setting's key, type, default and
help are read off the classes (``_fields``), config files and ``--set`` are merged over the
defaults (``_resolve``), and the command line's flags are made from them (``_flags``). Nothing
here imports JAX.
"""

from ._distill_config import DistillConfig as DistillConfig
from ._fields import Key as Key
from ._fields import compared as compared
from ._fields import declared_identity as declared_identity
from ._fields import flat as flat
from ._fields import keys as keys
from ._fields import parse_window as parse_window
from ._flags import add_flags as add_flags
from ._flags import given_flags as given_flags
from ._grpo_config import LOSS_TYPES as LOSS_TYPES
from ._grpo_config import SCALINGS as SCALINGS
from ._grpo_config import GRPOConfig as GRPOConfig
from ._intervals import Range as Range
from ._intervals import bounded as bounded
from ._loop import MAX_STEPS as MAX_STEPS
from ._loop import SEEDS as SEEDS
from ._loop import TrainConfig as TrainConfig
from ._mesh_config import AXES as AXES
from ._mesh_config import MeshConfig as MeshConfig
from ._mesh_config import shown_axes as shown_axes
from ._optimizer import WARMUP_FLOOR as WARMUP_FLOOR
from ._optimizer import WARMUP_FRACTION as WARMUP_FRACTION
from ._optimizer import OptimizerConfig as OptimizerConfig
from ._optimizer import default_warmup as default_warmup
from ._run_settings import OBJECTIVES as OBJECTIVES
from ._run_settings import AttentionSettings as AttentionSettings
from ._run_settings import EvalHarnessSettings as EvalHarnessSettings
from ._run_settings import FinetuneSettings as FinetuneSettings
from ._run_settings import LoRASettings as LoRASettings
from ._run_settings import RunSettings as RunSettings
from ._run_settings import WandbSettings as WandbSettings
from ._run_settings import finetune_defaults as finetune_defaults
from ._sources import defaults as defaults
from ._sources import parse_assignment as parse_assignment
from ._sources import read_config_file as read_config_file
from ._sources import resolve_settings as resolve_settings
