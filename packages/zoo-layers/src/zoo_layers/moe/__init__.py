"""Mixture-of-experts layers: the router, dropless experts over grouped matmuls, the router's
statistics (load-balancing and z-losses, the experts' load) and expert parallelism on a mesh."""

from ._experts import expert_mlp as expert_mlp
from ._grouped import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._grouped import ENV_VAR as ENV_VAR
from ._grouped import GroupedMatmul as GroupedMatmul
from ._grouped import grouped_matmul as grouped_matmul
from ._grouped import grouped_matmuls as grouped_matmuls
from ._grouped import register_grouped_matmul as register_grouped_matmul
from ._grouped import resolve_grouped_matmul as resolve_grouped_matmul
from ._layer import MoE as MoE
from ._routing import route as route
from ._stats import RouterStats as RouterStats
from ._tiled import tile_rows as tile_rows
from ._tiled import tiled_grouped_matmul as tiled_grouped_matmul
