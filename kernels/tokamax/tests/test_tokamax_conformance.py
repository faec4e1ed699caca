"""tokamax's kernel against the cross-entropy contract's conformance suite (float64 numpy,
fresh random inputs), on a TPU: tokamax reads the TPU's parameters when its kernel is traced,
so it has no interpret mode on a CPU, and this suite runs where a TPU is the default backend
(``zoo kernels verify tokamax`` there). The cases it refuses by its check (a [V, D] head, a soft
cap, a temperature) are not run: such calls fall back (test_tokamax_check)."""

import jax
import pytest

from zoo_attention.cross_entropy.testing import ConformanceSuite

pytestmark = pytest.mark.skipif(
    jax.default_backend() != "tpu",
    reason="tokamax's Mosaic kernel runs on a TPU only (no interpret mode on this backend)",
)


class TestTokamaxConformance(ConformanceSuite):
    implementation = "tokamax"
