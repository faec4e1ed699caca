"""Training on a device mesh: the mesh, the sharding rules, sharded compilation, and runs of
several processes.

The engine is JAX's own: a ``Mesh`` over every device of every process, ``NamedSharding``s
planned from the logical axis names the layers declare, GSPMD for the rest, and
``jax.distributed`` for processes.
"""

from ._checks import check_batch as check_batch
from ._checks import check_experts as check_experts
from ._checks import check_heads as check_heads
from ._checks import check_recurrent as check_recurrent
from ._checks import check_sequence as check_sequence
from ._context import balanced_sequences as balanced_sequences
from ._context import sequence_shards as sequence_shards
from ._global_batches import BatchLayout as BatchLayout
from ._global_batches import batch_reader as batch_reader
from ._global_batches import to_host as to_host
from ._jit import MeshFunction as MeshFunction
from ._jit import init_sharded as init_sharded
from ._jit import mesh_context as mesh_context
from ._mesh import AXES as AXES
from ._mesh import MeshConfig as MeshConfig
from ._mesh import describe_mesh as describe_mesh
from ._mesh import make_mesh as make_mesh
from ._mesh import mesh_record as mesh_record
from ._mesh import mesh_sizes as mesh_sizes
from ._mesh import platform_of as platform_of
from ._packed_batch import PackedBatch as PackedBatch
from ._packed_batch import unpacked as unpacked
from ._processes import EXIT_PEER_LOST as EXIT_PEER_LOST
from ._processes import ProcessConfig as ProcessConfig
from ._processes import StartError as StartError
from ._processes import abandon_processes as abandon_processes
from ._processes import agree_settings as agree_settings
from ._processes import await_verdict as await_verdict
from ._processes import barrier as barrier
from ._processes import is_primary as is_primary
from ._processes import key_value_store as key_value_store
from ._processes import process_label as process_label
from ._processes import start_processes as start_processes
from ._processes import stop_processes as stop_processes
from ._rules import DEFAULT_RULES as DEFAULT_RULES
from ._rules import UNNAMED as UNNAMED
from ._rules import MeshAxes as MeshAxes
from ._rules import make_rules as make_rules
from ._rules import rule_axes as rule_axes
from ._shardings import array_spec as array_spec
from ._shardings import batch_array_spec as batch_array_spec
from ._shardings import batch_shardings as batch_shardings
from ._shardings import batch_shards as batch_shards
from ._shardings import batch_spec as batch_spec
from ._shardings import fit_sharding as fit_sharding
from ._shardings import is_array_like as is_array_like
from ._shardings import replicated as replicated
from ._shardings import state_shardings as state_shardings
from ._shardings import tree_shardings as tree_shardings
from ._shardings import with_shardings as with_shardings
