"""zoo_models: the zoo model catalogue (GPT-2, Llama, Mistral, Qwen2, Gemma 2, Qwen3, Gemma 3,
OLMo 2, Mixtral, Qwen3-MoE, gpt-oss, DeepSeek-V3)."""

# Tokenizers and chat templates live in zoo-data (no JAX); these names stay for user code.
from zoo_data import ByteTokenizer as ByteTokenizer
from zoo_data import ChatTemplate as ChatTemplate
from zoo_data import ChatTemplateError as ChatTemplateError
from zoo_data import HFTokenizer as HFTokenizer
from zoo_data import RenderedChat as RenderedChat
from zoo_data import ZooTokenizer as _ZooTokenizer
from zoo_data import load_tokenizer as load_tokenizer

from ._config import REMAT_MLP_CHUNK as REMAT_MLP_CHUNK
from ._config import ModelConfig as ModelConfig
from ._generate import GenerationConfig as GenerationConfig
from ._generate import generate as generate
from ._generate import left_pad as left_pad
from ._hf_config import SUPPORTED_MODEL_TYPES as SUPPORTED_MODEL_TYPES
from ._hf_config import checkpoint_dtype as checkpoint_dtype
from ._hf_config import from_hf_config as from_hf_config
from ._hf_config import to_hf_config as to_hf_config
from ._hf_io import from_hf_state_dict as from_hf_state_dict
from ._hf_io import generation_config as generation_config
from ._hf_io import hf_leaf_names as hf_leaf_names
from ._hf_io import hf_state_dict as hf_state_dict
from ._hf_io import load_hf as load_hf
from ._hf_io import read_generation_config as read_generation_config
from ._hf_io import save_hf as save_hf
from ._hf_io import stop_token_ids as stop_token_ids
from ._memory import DoesNotFitError as DoesNotFitError
from ._memory import host_memory_bytes as host_memory_bytes
from ._memory import host_memory_free as host_memory_free
from ._memory import host_memory_limit as host_memory_limit
from ._memory import human_bytes as human_bytes
from ._model import KVCache as KVCache
from ._model import LanguageModel as LanguageModel
from ._model import Transformer as Transformer
from ._model import build as build
from ._model import document_positions as document_positions
from ._model import num_params as num_params
from ._model import param_bytes as param_bytes
from ._presets import get as get
from ._presets import presets as presets
from ._safetensors_files import save_safetensors as save_safetensors
from ._sampling import sample_logits as sample_logits
from ._sampling import top_k_filter as top_k_filter
from ._sampling import top_p_filter as top_p_filter
from .families import FAMILIES as FAMILIES
from .families import default_lora_targets as default_lora_targets

#: The protocol every zoo tokenizer meets (``zoo_data.ZooTokenizer``), under its name here.
Tokenizer = _ZooTokenizer

__version__ = "0.7.0.dev0"
