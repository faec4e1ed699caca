"""The conformance suite must fail loudly for kernels that are subtly wrong."""

import textwrap

import pytest

BROKEN_KERNELS = {
    # Ignores the causal flag.
    "no_causal": """
        def __call__(self, q, k, v, ids, spec):
            return XLA(q, k, v, ids, dataclasses.replace(spec, is_causal=False))
    """,
    # Maps query heads to kv heads by tiling instead of grouping (wrong GQA layout).
    "gqa_tiled": """
        def __call__(self, q, k, v, ids, spec):
            g = spec.group_size
            k = jnp.tile(k, (1, 1, g, 1)); v = jnp.tile(v, (1, 1, g, 1))
            return XLA(q, k, v, ids, dataclasses.replace(spec, num_kv_heads=spec.num_heads))
    """,
    # Leaves NaN in rows that see no key (a naive -inf mask).
    "nan_empty_rows": """
        def __call__(self, q, k, v, ids, spec):
            out = XLA(q, k, v, ids, spec)
            empty = jnp.all(out == 0, axis=-1, keepdims=True)
            return jnp.where(empty, jnp.nan, out).astype(q.dtype)
    """,
    # Right forward, wrong key gradient.
    "bad_dk": """
        def __call__(self, q, k, v, ids, spec):
            @jax.custom_vjp
            def f(q, k, v):
                return XLA(q, k, v, ids, spec)
            def fwd(q, k, v):
                out, vjp = jax.vjp(lambda *a: XLA(*a, ids, spec), q, k, v)
                return out, vjp
            def bwd(vjp, g):
                dq, dk, dv = vjp(g)
                return dq, dk * 1.01, dv
            f.defvjp(fwd, bwd)
            return f(q, k, v)
    """,
}


# The cases each flaw is run on: all of them unless named here. NaN in empty rows shows only in
# the cases that have such rows; run from the first case, the suite would pass 27 others first.
SELECT = {"nan_empty_rows": "reference and empty"}


@pytest.mark.parametrize("flaw", sorted(BROKEN_KERNELS))
def test_suite_fails_for_broken_kernel(failing_suite, flaw: str) -> None:
    body = textwrap.indent(textwrap.dedent(BROKEN_KERNELS[flaw]), "    ")
    text = failing_suite(
        f"""
import dataclasses
import jax
import jax.numpy as jnp
import zoo_attention
from zoo_attention._xla import KERNEL as XLA
from zoo_attention.testing import ConformanceSuite


class Broken(zoo_attention.AttentionKernel):
    name = "broken_{flaw}"
    version = "0.0.1"

    def check(self, spec):
        return None
{body}

zoo_attention.register_kernel(Broken(), replace=True)


class TestBroken(ConformanceSuite):
    implementation = "broken_{flaw}"
""",
        SELECT.get(flaw, "reference or scope"),
    )
    # The suite must report what broke, not just that something did.
    assert "max abs error" in text or "non-finite" in text or "not zero" in text
