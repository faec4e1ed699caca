"""zoo-train: the training loop core, data pipeline, checkpoints and metrics of zoo.

The loop works on any Equinox model with a loss function; see the package README for the API.
"""

from . import checkpoint as checkpoint
from . import data as data
from . import loop as loop
from . import parallel as parallel
from . import peft as peft
from ._changes import provenance_changes as provenance_changes
from ._compiler import step_compiler_options as step_compiler_options
from ._config import OptimizerConfig as OptimizerConfig
from ._config import TrainConfig as TrainConfig
from ._errors import CheckpointMismatchError as CheckpointMismatchError
from ._errors import CheckpointWriteError as CheckpointWriteError
from ._errors import NonFiniteLossError as NonFiniteLossError
from ._errors import NoUsableCheckpointError as NoUsableCheckpointError
from ._errors import RunLockedError as RunLockedError
from ._errors import StoppedBySignalError as StoppedBySignalError
from ._inference import evaluate_model as evaluate_model
from ._inference import sample_text as sample_text
from ._loss import LossFn as LossFn
from ._loss import make_lm_loss as make_lm_loss
from ._loss import token_losses as token_losses
from ._malloc import cap_malloc_arenas as cap_malloc_arenas
from ._optim import default_decay_mask as default_decay_mask
from ._optim import make_optimizer as make_optimizer
from ._optim import make_schedule as make_schedule
from ._plan import StatePlan as StatePlan
from ._plan import plan_state as plan_state
from ._precision import cast_floating as cast_floating
from ._precision import resolve_compute_dtype as resolve_compute_dtype
from ._provenance import provenance as provenance
from ._requirements import check_requirement as check_requirement
from ._runs import LoadedRun as LoadedRun
from ._runs import load_run as load_run
from ._state import TrainState as TrainState
from ._state import init_train_state as init_train_state
from ._step import accumulate_gradients as accumulate_gradients
from ._step import make_eval_step as make_eval_step
from ._step import make_train_step as make_train_step
from ._step import split_micro_batches as split_micro_batches
from ._step_metrics import PackedMetrics as PackedMetrics
from ._step_metrics import StepMetrics as StepMetrics
from ._step_metrics import Window as Window
from ._usage import UsageError as UsageError
from .checkpoint import Checkpointer as Checkpointer
from .checkpoint import Restored as Restored
from .checkpoint import fingerprints as fingerprints
from .checkpoint import state_leaves as state_leaves
from .loop import CHECKPOINT_DIR as CHECKPOINT_DIR
from .loop import METRICS_FILE as METRICS_FILE
from .loop import PLOT_FILE as PLOT_FILE
from .loop import EvalSource as EvalSource
from .loop import MetricsWriter as MetricsWriter
from .loop import Progress as Progress
from .loop import StepEnd as StepEnd
from .loop import TrainResult as TrainResult
from .loop import plot_loss_curve as plot_loss_curve
from .loop import read_metrics as read_metrics
from .loop import train as train
from .peft import ADAPTER_CONFIG as ADAPTER_CONFIG
from .peft import ADAPTER_FILE as ADAPTER_FILE
from .peft import LoRAConfig as LoRAConfig
from .peft import LoRALinear as LoRALinear
from .peft import adapter_arrays as adapter_arrays
from .peft import apply_lora as apply_lora
from .peft import count_params as count_params
from .peft import export_hf as export_hf
from .peft import finetune as finetune
from .peft import fit_tokenizer as fit_tokenizer
from .peft import load_adapters as load_adapters
from .peft import lora_filter as lora_filter
from .peft import merge_lora as merge_lora
from .peft import save_adapters as save_adapters

__version__ = "0.7.1.dev0"
