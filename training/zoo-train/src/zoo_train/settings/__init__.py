"""Run settings: declared once, as dataclasses, and read from files, ``--set`` and flags.

The classes in ``_run`` are the single source of truth: each setting's key, type, default, help
and flag are read off them (``_fields``), config files and ``--set`` are merged over the
defaults (``_resolve``), and the command line's flags are made from them (``_flags``).
"""

from ._fields import Key as Key
from ._fields import flat as flat
from ._fields import keys as keys
from ._flags import add_flags as add_flags
from ._flags import given_flags as given_flags
from ._resolve import defaults as defaults
from ._resolve import parse_assignment as parse_assignment
from ._resolve import read_config_file as read_config_file
from ._resolve import resolve_settings as resolve_settings
from ._run import OBJECTIVES as OBJECTIVES
from ._run import AttentionSettings as AttentionSettings
from ._run import FinetuneSettings as FinetuneSettings
from ._run import LoRASettings as LoRASettings
from ._run import OptimizerSettings as OptimizerSettings
from ._run import RunSettings as RunSettings
from ._run import WandbSettings as WandbSettings
from ._run import finetune_defaults as finetune_defaults
