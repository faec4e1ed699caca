"""Both cross-entropy kernels zoo-attention ships pass the contract's conformance suite:
``logits`` (the reference, against float64 numpy all the same) and ``fused_xla``, the latter
with tiles of a few tokens, so every case runs several tiles and the last one padded."""

import pytest

from zoo_attention.cross_entropy._fused_policy import TILE_ENV
from zoo_attention.cross_entropy.testing import ConformanceSuite


class TestLogitsConformance(ConformanceSuite):
    implementation = "logits"


class TestFusedXlaConformance(ConformanceSuite):
    implementation = "fused_xla"

    @pytest.fixture(autouse=True)
    def small_tiles(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(TILE_ENV, "4")
