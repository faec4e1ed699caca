from zoo_attention.linear.testing import ConformanceSuite


class TestChunkedXlaConformance(ConformanceSuite):
    implementation = "chunked_xla"


class TestRecurrentConformance(ConformanceSuite):
    implementation = "recurrent"
