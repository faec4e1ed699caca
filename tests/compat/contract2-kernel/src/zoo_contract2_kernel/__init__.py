"""A kernel that declares attention contract 2.0; zoo-attention 1.x must refuse to register it."""

from zoo_attention import AttentionKernel
from zoo_attention._xla import KERNEL as _XLA


class Contract2Kernel(AttentionKernel):
    name = "contract2"
    contract_version = "2.0"
    priority = 100  # would win the default order if it were registered

    def check(self, spec):
        return None

    def __call__(self, query, key, value, segment_ids, spec):
        return _XLA(query, key, value, segment_ids, spec)


KERNEL = Contract2Kernel()
