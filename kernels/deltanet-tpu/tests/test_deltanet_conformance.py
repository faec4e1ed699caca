from zoo_attention.linear.testing import ConformanceSuite


class TestDeltanetTpuConformance(ConformanceSuite):
    implementation = "deltanet_tpu"
