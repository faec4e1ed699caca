"""Preference tuning: DPO, IPO, SimPO and ORPO on packed pairs.

The objectives per pair (``_objectives``), the sides' log-probabilities of packed rows
(``_logps``), the loss over a batch (``_loss``), the reference log-probabilities computed once
for full fine-tuning (``_reference``), and what packing saves (``_packing``).
"""

from ._logps import side_sums as side_sums
from ._logps import token_logps as token_logps
from ._loss import PreferenceLoss as PreferenceLoss
from ._objectives import DEFAULT_BETA as DEFAULT_BETA
from ._objectives import METRICS as METRICS
from ._objectives import OBJECTIVES as OBJECTIVES
from ._objectives import PreferenceConfig as PreferenceConfig
from ._objectives import pair_objective as pair_objective
from ._packing_savings import PackingReport as PackingReport
from ._packing_savings import packing_report as packing_report
from ._reference import REFERENCE_DIR as REFERENCE_DIR
from ._reference import keep_reference as keep_reference
from ._reference import read_reference as read_reference
from ._reference import reference_logps as reference_logps
