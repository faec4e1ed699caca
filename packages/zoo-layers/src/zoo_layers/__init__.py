"""zoo_layers: Equinox transformer layers whose attention goes through the zoo attention contract."""

from typing import Any

from . import deltanet as deltanet
from ._attention import Attention as Attention
from ._attention import QKNorm as QKNorm
from ._block import TransformerBlock as TransformerBlock
from ._cache import KVCache as KVCache
from ._chunked import chunked_tokens as chunked_tokens
from ._dropout import Dropout as Dropout
from ._dtype import DTypePolicy as DTypePolicy
from ._dtype import check_float_dtype as check_float_dtype
from ._dtype import default_compute_dtype as default_compute_dtype
from ._embedding import Embedding as Embedding
from ._head import OutputHead as OutputHead
from ._latent_attention import LatentAttention as LatentAttention
from ._linear import Linear as Linear
from ._linear import dense as dense
from ._logical import BATCH as BATCH
from ._logical import EMBED as EMBED
from ._logical import EXPERTS as EXPERTS
from ._logical import HEAD_DIM as HEAD_DIM
from ._logical import HEADS as HEADS
from ._logical import KV_HEADS as KV_HEADS
from ._logical import LAYERS as LAYERS
from ._logical import MLP_AXIS as MLP_AXIS
from ._logical import NORM as NORM
from ._logical import POSITION as POSITION
from ._logical import SEQUENCE as SEQUENCE
from ._logical import VOCAB as VOCAB
from ._logical import LogicalAxes as LogicalAxes
from ._logical import Rules as Rules
from ._logical import axis_rules as axis_rules
from ._logical import current_rules as current_rules
from ._logical import logical_axes as logical_axes
from ._logical import logical_constraint as logical_constraint
from ._logical import logical_to_spec as logical_to_spec
from ._logical import with_names as with_names
from ._mlp import MLP as MLP
from ._mlp import activation_fn as activation_fn
from ._norm import LayerNorm as LayerNorm
from ._norm import RMSNorm as RMSNorm
from ._rope import RopeScaling as RopeScaling
from ._rope import Rotary as Rotary
from ._rope import rope_frequencies as rope_frequencies
from ._rope import rotate_half as rotate_half
from ._rope import yarn_mscale as yarn_mscale
from ._stack import LayerStack as LayerStack
from ._stack import layer_slot as layer_slot
from ._stack import scan_by_default as scan_by_default
from ._trainable import trainable_mask as trainable_mask
from .deltanet import GatedDeltaNet as GatedDeltaNet
from .moe import MoE as MoE
from .moe import RouterStats as RouterStats
from .moe import grouped_matmul as grouped_matmul

__version__ = "0.6.0.dev0"


def __getattr__(name: str) -> Any:
    # zoo-layers 0.4's grouped-matmul registry (now the contract's), kept working until 0.6.
    if name not in ("GroupedMatmul", "register_grouped_matmul"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .moe import _legacy

    return _legacy.deprecated_name(__name__, name)
