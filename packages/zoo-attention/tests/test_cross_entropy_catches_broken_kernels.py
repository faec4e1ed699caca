"""The cross-entropy conformance suite must fail loudly for kernels that are subtly wrong."""

import textwrap

import pytest

BROKEN_KERNELS = {
    # Ignores the soft cap.
    "no_soft_cap": """
        def __call__(self, h, w, t, m, spec):
            return LOGITS(h, w, t, m, dataclasses.replace(spec, soft_cap=None))
    """,
    # Returns log Z where the token does not count.
    "log_z_leaks": """
        def __call__(self, h, w, t, m, spec):
            ce, _ = LOGITS(h, w, t, m, spec)
            _, lz = LOGITS(h, w, t, None, spec)
            return ce, lz
    """,
    # Right outputs, a gradient through log Z that is dropped (a z-loss that trains nothing).
    "no_log_z_gradient": """
        def __call__(self, h, w, t, m, spec):
            ce, lz = LOGITS(h, w, t, m, spec)
            return ce, jax.lax.stop_gradient(lz)
    """,
    # A summed loss of its own that counts every token it does not drop at weight 1.
    "loss_ignores_weights": """
        def __call__(self, h, w, t, m, spec):
            return LOGITS(h, w, t, m, spec)

        def loss(self, h, w, t, weights, spec, z_loss):
            mask = None if weights is None else weights != 0
            ce, lz = LOGITS(h, w, t, mask, spec)
            return cross_entropy.sum_losses(ce, lz, None, z_loss)
    """,
    # A summed loss whose z-loss term trains nothing.
    "loss_no_z_gradient": """
        def __call__(self, h, w, t, m, spec):
            return LOGITS(h, w, t, m, spec)

        def loss(self, h, w, t, weights, spec, z_loss):
            ce, lz = LOGITS(h, w, t, None if weights is None else weights != 0, spec)
            return cross_entropy.sum_losses(ce, jax.lax.stop_gradient(lz), weights, z_loss)
    """,
    # Accumulates the logits in bfloat16.
    "bf16_logits": """
        def __call__(self, h, w, t, m, spec):
            ce, lz = LOGITS(h.astype(jnp.bfloat16), w.astype(jnp.bfloat16), t, m, spec)
            return ce, lz
    """,
}


@pytest.mark.parametrize("flaw", sorted(BROKEN_KERNELS))
def test_suite_fails_for_broken_kernel(failing_suite, flaw: str) -> None:
    body = textwrap.indent(textwrap.dedent(BROKEN_KERNELS[flaw]), "    ")
    text = failing_suite(
        f"""
import dataclasses

import jax
import jax.numpy as jnp
from zoo_attention import cross_entropy
from zoo_attention.cross_entropy._logits import KERNEL as LOGITS
from zoo_attention.cross_entropy.testing import ConformanceSuite


class Broken(cross_entropy.CrossEntropyKernel):
    name = "broken_{flaw}"
    version = "0.0.1"

    def check(self, spec):
        return None
{body}

cross_entropy.register_kernel(Broken(), replace=True)


class TestBroken(ConformanceSuite):
    implementation = "broken_{flaw}"
""",
        "reference",
    )
    assert any(w in text for w in ("max abs error", "not zero", "dtype")), text
