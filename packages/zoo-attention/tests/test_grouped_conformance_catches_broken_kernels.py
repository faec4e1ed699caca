"""The grouped-matmul conformance suite must fail loudly for kernels that are subtly wrong."""

import textwrap

import pytest

BROKEN_KERNELS = {
    # Leaves whatever was in memory in the rows past the groups.
    "garbage_past_rows": """
        def __call__(self, lhs, rhs, sizes, spec):
            out = RAGGED_DOT(lhs, rhs, sizes, spec)
            past = jnp.arange(lhs.shape[0])[:, None] >= jnp.sum(sizes)
            return jnp.where(past, 1.0, out).astype(lhs.dtype)
    """,
    # Gives every group at least one row (a kernel that cannot represent an empty group).
    "no_empty_groups": """
        def __call__(self, lhs, rhs, sizes, spec):
            return RAGGED_DOT(lhs, rhs, jnp.maximum(sizes, 1), spec)
    """,
    # Right forward, a wrong gradient for rhs.
    "bad_drhs": """
        def __call__(self, lhs, rhs, sizes, spec):
            @jax.custom_vjp
            def f(a, b):
                return RAGGED_DOT(a, b, sizes, spec)
            def fwd(a, b):
                return jax.vjp(lambda a, b: RAGGED_DOT(a, b, sizes, spec), a, b)
            def bwd(vjp, g):
                da, db = vjp(g)
                return da, db * 1.01
            f.defvjp(fwd, bwd)
            return f(lhs, rhs)
    """,
    # Accumulates in float32 but returns float32 for a bfloat16 lhs.
    "wrong_dtype": """
        def __call__(self, lhs, rhs, sizes, spec):
            return RAGGED_DOT(lhs.astype(jnp.float32), rhs.astype(jnp.float32), sizes, spec)
    """,
}


@pytest.mark.parametrize("flaw", sorted(BROKEN_KERNELS))
def test_suite_fails_for_broken_kernel(failing_suite, flaw: str) -> None:
    body = textwrap.indent(textwrap.dedent(BROKEN_KERNELS[flaw]), "    ")
    text = failing_suite(
        f"""
import jax
import jax.numpy as jnp
from zoo_attention import grouped
from zoo_attention.grouped._ragged_dot import KERNEL as RAGGED_DOT
from zoo_attention.grouped.testing import ConformanceSuite


class Broken(grouped.GroupedMatmulKernel):
    name = "broken_{flaw}"
    version = "0.0.1"

    def check(self, spec):
        return None
{body}

grouped.register_kernel(Broken(), replace=True)


class TestBroken(ConformanceSuite):
    implementation = "broken_{flaw}"
""",
        "reference",
    )
    assert any(w in text for w in ("max abs error", "not zero", "dtype")), text
