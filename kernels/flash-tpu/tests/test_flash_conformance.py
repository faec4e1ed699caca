"""The shared contract suite, run against flash_tpu in TPU interpret mode (NaN-poisoned memory)."""

from zoo_attention.testing import ConformanceSuite


class TestConformance(ConformanceSuite):
    implementation = "flash_tpu"
