from zoo_attention.testing import ConformanceSuite


class TestXlaConformance(ConformanceSuite):
    implementation = "xla"
