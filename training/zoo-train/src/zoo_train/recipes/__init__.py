"""Recipes: the bodies of ``zoo train`` and ``zoo finetune``, each a short function over shared
steps (the mesh, the model, the data, the LoRA adapters, the run, the export and the sample),
and the steps other commands share (loading a model, building data)."""

from ._checks import finetune_model_error as finetune_model_error
from ._compiled import check_compiled_objective as check_compiled_objective
from ._compiled import check_json_output as check_json_output
from ._compiled import compiled_model_config as compiled_model_config
from ._compiled import compiled_step as compiled_step
from ._data import Data as Data
from ._data import build_data as build_data
from ._data import check_data_paths as check_data_paths
from ._data import eval_sources as eval_sources
from ._finetune import finetune_recipe as finetune_recipe
from ._finetuning import finetune as finetune
from ._finetuning import finetune_step as finetune_step
from ._mesh import check_mesh_fits as check_mesh_fits
from ._mesh import check_positions as check_positions
from ._mesh import mesh_and_rules as mesh_and_rules
from ._model import preset_config as preset_config
from ._sources import checkpoint_dtype_of as checkpoint_dtype_of
from ._sources import load_hf_on_mesh as load_hf_on_mesh
from ._sources import load_model as load_model
from ._sources import tokenizer_source as tokenizer_source
from ._stores import data_cache as data_cache
from ._train import train_recipe as train_recipe
