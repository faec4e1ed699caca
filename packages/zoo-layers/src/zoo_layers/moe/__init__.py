"""Mixture-of-experts layers: the router, dropless experts over grouped matmuls (through the
grouped-matmul contract of zoo-attention), the router's statistics (load-balancing and
z-losses, the experts' load), auxiliary-loss-free balancing of a sigmoid router and expert
parallelism on a mesh."""

from typing import Any

from ._balance import balanced_correction_bias as balanced_correction_bias
from ._experts import clamped_swiglu as clamped_swiglu
from ._experts import expert_mlp as expert_mlp
from ._grouped import ENV_VAR as ENV_VAR
from ._grouped import grouped_matmul as grouped_matmul
from ._moe import MoE as MoE
from ._routing import route as route
from ._stats import RouterStats as RouterStats
from ._tiled import tile_rows as tile_rows
from ._tiled import tiled_grouped_matmul as tiled_grouped_matmul


def __getattr__(name: str) -> Any:
    # The grouped-matmul registry of zoo-layers 0.4, kept working (each access warns) until 0.6.
    from . import _legacy

    if name not in _legacy.DEPRECATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _legacy.deprecated_name(__name__, name)
