"""``tiled`` against the grouped-matmul contract's conformance suite."""

# Importing zoo_layers provides `tiled` to the registry where its entry point is not installed
# (a source tree on PYTHONPATH); installed, the entry point registers it.
import zoo_layers  # noqa: F401
from zoo_attention.grouped.testing import ConformanceSuite


class TestTiledConformance(ConformanceSuite):
    implementation = "tiled"
