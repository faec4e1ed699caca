"""The model families: one module per family, each registering a :class:`Family` that holds
its Hugging Face config reader and writer, config keys, weight names and presets.

A family of one's own is one more module that calls :func:`register` (see the package README,
"Adding a model family").
"""

from .._hf_weights import Rule as Rule
from .._hf_weights import one as one
from ._registry import Family as Family
from ._registry import Reader as Reader
from ._registry import Writer as Writer
from ._registry import default_lora_targets as default_lora_targets
from ._registry import family_names as family_names
from ._registry import lookup as lookup
from ._registry import model_types as model_types
from ._registry import reader as reader
from ._registry import register as register
from ._registry import registered as registered
from ._registry import unregister as unregister

# isort: off
# Registration order is catalogue order: the order families and presets are listed in.
from . import gpt2 as gpt2
from . import llama as llama
from . import mistral as mistral
from . import qwen2 as qwen2
from . import gemma2 as gemma2
from . import qwen3 as qwen3
from . import gemma3 as gemma3
from . import olmo2 as olmo2
from . import mixtral as mixtral
from . import qwen3_moe as qwen3_moe
from . import gpt_oss as gpt_oss
from . import deepseek_v3 as deepseek_v3
from . import qwen3_5 as qwen3_5

# isort: on

#: The families zoo_models ships (:func:`family_names` adds any registered since).
FAMILIES: tuple[str, ...] = family_names()
#: The ``model_type`` values they read (:func:`model_types` adds any registered since).
SUPPORTED_MODEL_TYPES: tuple[str, ...] = model_types()
