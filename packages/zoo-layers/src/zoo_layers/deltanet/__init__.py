"""zoo_layers.deltanet: the gated DeltaNet token mixer (Qwen3.5, Qwen3-Next), its causal
depthwise convolution and its gated output norm. The recurrence goes through the
linear-attention contract, ``zoo_attention.linear.gated_delta_rule``."""

from ._conv import causal_conv as causal_conv
from ._conv import conv_history as conv_history
from ._gated_deltanet import GatedDeltaNet as GatedDeltaNet
from ._gated_norm import GatedRMSNorm as GatedRMSNorm
