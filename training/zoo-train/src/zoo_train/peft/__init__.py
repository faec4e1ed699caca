"""Parameter-efficient fine-tuning: the LoRA model transform and the PEFT file format.

Three layers, imported one way: the LoRA maths (``_lora``), the PEFT adapter format over it
(``_format``), and the transform a fine-tune trains (``_adapt``) and the export (``_export``)
over both, with the trainer hook that saves the adapters (``SaveAdapters``). The fine-tuning
run itself is a recipe (:mod:`zoo_train.recipes`).
"""

from ._adapt import SaveAdapters as SaveAdapters
from ._adapt import add_adapters as add_adapters
from ._export import ADAPTER_DIR as ADAPTER_DIR
from ._export import export_hf as export_hf
from ._export import fit_tokenizer as fit_tokenizer
from ._lora import TARGETS as TARGETS
from ._lora import LoRAConfig as LoRAConfig
from ._lora import LoRALinear as LoRALinear
from ._lora import adapter_arrays as adapter_arrays
from ._lora import apply_lora as apply_lora
from ._lora import count_params as count_params
from ._lora import lora_filter as lora_filter
from ._lora import merge_lora as merge_lora
from ._lora import without_adapters as without_adapters
from ._peft_directory import ADAPTER_CONFIG as ADAPTER_CONFIG
from ._peft_directory import ADAPTER_FILE as ADAPTER_FILE
from ._peft_directory import PREFIX as PREFIX
from ._peft_directory import check_peft_targets as check_peft_targets
from ._peft_directory import load_adapters as load_adapters
from ._peft_directory import load_peft_weights as load_peft_weights
from ._peft_directory import peft_targets as peft_targets
from ._peft_directory import peft_tensors as peft_tensors
from ._peft_directory import read_peft_config as read_peft_config
from ._peft_directory import save_adapters as save_adapters
from ._peft_directory import save_peft_adapter as save_peft_adapter
