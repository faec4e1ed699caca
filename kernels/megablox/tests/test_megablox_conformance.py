"""The grouped-matmul contract's conformance suite, run against megablox in Pallas TPU
interpret mode (uninitialised memory poisoned with NaNs, so rows the kernel leaves unwritten
would show)."""

from zoo_attention.grouped.testing import ConformanceSuite


class TestGroupedConformance(ConformanceSuite):
    implementation = "megablox"
