"""The linear-attention conformance suite must fail loudly for kernels that are subtly wrong."""

import textwrap

import pytest

# Each flaw, and the cases that show it (the suite runs them until the first failure).
SHOWN_BY = {
    "no_reset": "reference and packed",
    "ignores_initial_state": "reference and initial",
    "bad_dbeta": "reference and t100",
    "state_dtype": "reference and bf16",
}
BROKEN_KERNELS = {
    # Packed documents leak into each other: the state is never reset.
    "no_reset": """
        def __call__(self, q, k, v, g, beta, ids, state, spec):
            return CHUNKED(q, k, v, g, beta, None, state, spec)
    """,
    # Starts from zeros whatever state it is given.
    "ignores_initial_state": """
        def __call__(self, q, k, v, g, beta, ids, state, spec):
            return CHUNKED(q, k, v, g, beta, ids, None, spec)
    """,
    # Right forward, a wrong gradient for beta.
    "bad_dbeta": """
        def __call__(self, q, k, v, g, beta, ids, state, spec):
            @jax.custom_vjp
            def f(beta):
                return CHUNKED(q, k, v, g, beta, ids, state, spec)
            def fwd(beta):
                return jax.vjp(lambda b: CHUNKED(q, k, v, g, b, ids, state, spec), beta)
            def bwd(vjp, cot):
                (d,) = vjp(cot)
                return (d * 1.02,)
            f.defvjp(fwd, bwd)
            return f(beta)
    """,
    # Returns the final state in the inputs' dtype.
    "state_dtype": """
        def __call__(self, q, k, v, g, beta, ids, state, spec):
            out, final = CHUNKED(q, k, v, g, beta, ids, state, spec)
            return out, final.astype(v.dtype)
    """,
}


@pytest.mark.parametrize("flaw", sorted(BROKEN_KERNELS))
def test_suite_fails_for_broken_kernel(failing_suite, flaw: str) -> None:
    body = textwrap.indent(textwrap.dedent(BROKEN_KERNELS[flaw]), "    ")
    text = failing_suite(
        f"""
import jax
from zoo_attention import linear
from zoo_attention.linear._chunked import KERNEL as CHUNKED
from zoo_attention.linear.testing import ConformanceSuite


class Broken(linear.LinearAttentionKernel):
    name = "broken_{flaw}"
    version = "0.0.1"

    def check(self, spec):
        return None
{body}

linear.register_kernel(Broken(), replace=True)


class TestBroken(ConformanceSuite):
    implementation = "broken_{flaw}"
""",
        SHOWN_BY[flaw],
    )
    assert any(w in text for w in ("max abs error", "dtype")), text
