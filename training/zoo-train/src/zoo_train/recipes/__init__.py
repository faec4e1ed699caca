"""Recipes: each command or objective in one file that reads top to bottom, over the steps they
share (``_steps``: the mesh, the model source, the data, the trainer, the export, the sample).

``train`` is ``zoo train``; ``sft``, ``preference`` (DPO, IPO, SimPO, ORPO), ``grpo`` and
``distill`` are ``zoo finetune --objective ...``; ``compiled_trainer`` is the trainer whose step
``zoo compile`` lowers. Each takes the command's settings and returns its exit code.
"""

from typing import Any

from ._compile_step import check_compiled_objective as check_compiled_objective
from ._compile_step import check_json_output as check_json_output
from ._compile_step import compiled_model_config as compiled_model_config
from ._compile_step import compiled_trainer as compiled_trainer
from ._distill import DistillLoss as DistillLoss
from ._distill import DistillPair as DistillPair
from ._distill import distill as distill
from ._distill import generalized_jsd as generalized_jsd
from ._grpo import grpo as grpo
from ._preference import preference as preference
from ._sft import sft as sft
from ._steps import Data as Data
from ._steps import build_data as build_data
from ._steps import check_data_paths as check_data_paths
from ._steps import check_mesh_fits as check_mesh_fits
from ._steps import check_positions as check_positions
from ._steps import eval_sources as eval_sources
from ._steps import finetune_model_error as finetune_model_error
from ._steps import mesh_and_rules as mesh_and_rules
from ._steps import objective_error as objective_error
from ._steps import preset_config as preset_config
from ._stores import data_cache as data_cache
from ._train import train as train

#: Names kept for one minor release (zoo-train 0.10), each warning when called.
_DEPRECATED = ("finetune", "finetune_step")


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        from .. import _deprecated

        return getattr(_deprecated, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
