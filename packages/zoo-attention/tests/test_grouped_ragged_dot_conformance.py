from zoo_attention.grouped.testing import ConformanceSuite


class TestGroupedConformance(ConformanceSuite):
    implementation = "ragged_dot"
