"""What every benchmark shares: worker processes, results, tables, plots, the machine.

A benchmark is a module with ``NAME``, ``TITLE`` and ``run(quick) -> result``, and optionally
``plot(result, directory) -> [file names]`` and ``report(result) -> result`` (its tables derived
again from its stored raw numbers); ``bench/run.py`` lists them.
"""

from ._checkpoints import llama_checkpoint as llama_checkpoint
from ._flops import FORMULA as FORMULA
from ._flops import flops_per_token as flops_per_token
from ._flops import gpt2_matmul_params as gpt2_matmul_params
from ._machine import ROOT as ROOT
from ._machine import TPU_PYTHON as TPU_PYTHON
from ._machine import describe_machine as describe_machine
from ._machine import memory_cap as memory_cap
from ._machine import tpu_environment_missing as tpu_environment_missing
from ._peak import gemm_gflops as gemm_gflops
from ._peak import gemm_shapes as gemm_shapes
from ._peak import matmul_peak as matmul_peak
from ._plots import figure as figure
from ._plots import save_figure as save_figure
from ._report import console as console
from ._report import write_markdown as write_markdown
from ._results import RESULTS_DIR as RESULTS_DIR
from ._results import fmt as fmt
from ._results import new_result as new_result
from ._results import read_results as read_results
from ._results import results_dir as results_dir
from ._results import table as table
from ._results import target as target
from ._results import unavailable as unavailable
from ._results import write_result as write_result
from ._stats import gib as gib
from ._stats import median as median
from ._stats import slope as slope
from ._stats import time_calls as time_calls
from ._worker import Worker as Worker
from ._worker import guarded as guarded
from ._worker import serve as serve
