"""Ahead-of-time compilation of the train step for TPU topologies from any machine.

``zoo compile`` answers "does this model, at this batch and sequence length, fit that TPU
slice?" (and, with ``--max-seq-len``, "how long may its sequences be?") without the slice:
libtpu's compile-only devices stand in for the chips and the real
train step is compiled for them. What its peak is made of comes from XLA's own buffer
assignment (:func:`read_dump`), on any backend.
"""

from ._abstract_batch import abstract_batch as abstract_batch
from ._abstract_batch import batch_fields as batch_fields
from ._hbm import StepMemory as StepMemory
from ._hbm import gib as gib
from ._peak import PeakBreakdown as PeakBreakdown
from ._peak import PeakBuffer as PeakBuffer
from ._peak import dump_options as dump_options
from ._peak import read_dump as read_dump
from ._seq_len import max_seq_len as max_seq_len
from ._seq_len import snap_length as snap_length
from ._topology import KNOWN_TOPOLOGIES as KNOWN_TOPOLOGIES
from ._topology import LibtpuMissingError as LibtpuMissingError
from ._topology import available_hbm as available_hbm
from ._topology import check_libtpu as check_libtpu
from ._topology import chip_name as chip_name
from ._topology import topology_devices as topology_devices
from ._train_step import SearchStep as SearchStep
from ._train_step import StepReport as StepReport
from ._train_step import StepSetup as StepSetup
from ._train_step import all_gather_bytes as all_gather_bytes
from ._train_step import argument_names as argument_names
from ._train_step import bytes_per_device as bytes_per_device
from ._train_step import compile_step as compile_step
from ._train_step import count_collectives as count_collectives
from ._train_step import default_batch_limit as default_batch_limit
from ._train_step import max_batch as max_batch
from ._train_step import optimizer_state_bytes as optimizer_state_bytes
