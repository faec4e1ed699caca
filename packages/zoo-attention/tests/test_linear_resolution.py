"""The linear-attention contract's registry and resolution: the machinery of the other kinds
(explicit names, the ZOO_LINEAR_ATTENTION kill switch, one fallback warning naming the reason,
the default order ending with chunked_xla, the record under its own kind), and its memory."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention import linear
from zoo_attention.linear._chunked import KERNEL as CHUNKED

ENV = linear.ENV_VAR


class Picky(linear.LinearAttentionKernel):
    """Preferred on every platform, but serves only float32 (and says so)."""

    name = "picky_linear"
    version = "0.9.0"
    priority = 50

    def __init__(self):
        self.calls = 0

    def check(self, spec):
        return None if spec.dtype == "float32" else f"dtype {spec.dtype} is not float32"

    def __call__(self, *args):
        self.calls += 1
        return CHUNKED(*args)


@pytest.fixture
def picky(monkeypatch):
    """``picky_linear`` registered, and no installed kernel but the two of zoo-attention (so
    the default order is ``picky_linear, chunked_xla`` whichever kernel packages are here)."""
    monkeypatch.delenv(ENV, raising=False)
    others = [k for n, k in linear.kernels().items() if n not in ("chunked_xla", "recurrent")]
    for other in others:
        linear.unregister_kernel(other.name)
    kernel = linear.register_kernel(Picky(), replace=True)
    yield kernel
    linear.unregister_kernel("picky_linear")
    for other in others:
        linear.register_kernel(other, replace=True)


def _args(dtype=jnp.float32, t=20):
    rng = np.random.default_rng()
    qk = jnp.asarray(rng.standard_normal((1, t, 2, 8)), dtype)
    v = jnp.asarray(rng.standard_normal((1, t, 2, 8)), dtype)
    g = jnp.asarray(-rng.random((1, t, 2)), jnp.float32)
    return qk, qk, v, g, jnp.exp(g).astype(dtype)


def test_default_order_prefers_the_higher_priority_kernel_and_records_its_kind(
    picky, resolution_log
):
    linear.gated_delta_rule(*_args())
    (res,) = resolution_log.linear_attention
    assert (res.kernel, res.version, res.source, res.skipped, res.kind) == (
        "picky_linear",
        "0.9.0",
        "default",
        (),
        "linear_attention",
    )
    assert picky.calls == 1
    assert resolution_log.resolutions == [] and resolution_log.grouped_matmul == []


def test_the_kill_switch_falls_back_with_one_warning_and_names_are_obeyed(
    picky, monkeypatch, caplog, resolution_log
):
    monkeypatch.setenv(ENV, "picky_linear,chunked_xla")
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        for _ in range(3):
            out, state = linear.gated_delta_rule(*_args(jnp.bfloat16))
    warnings = [r.getMessage() for r in caplog.records if "instead of" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "linear attention chunked_xla" in warnings[0] and "is not float32" in warnings[0]
    assert out.dtype == jnp.bfloat16 and state.dtype == jnp.float32 and picky.calls == 0
    monkeypatch.setenv(ENV, "chunked_xla")  # switched off: the XLA kernel, even for float32
    args = _args()
    got = linear.gated_delta_rule(*args)
    assert resolution_log.linear_attention[-1].kernel == "chunked_xla" and picky.calls == 0
    monkeypatch.setenv(ENV, "picky_lnear")  # a typo names nothing installed
    with pytest.raises(
        ValueError, match=r"names no installed kernel; known kernels: .*chunked_xla"
    ):
        linear.gated_delta_rule(*args)
    monkeypatch.delenv(ENV)
    with pytest.raises(linear.KernelUnavailableError, match="linear attention kernel picky_linear"):
        linear.gated_delta_rule(*_args(jnp.bfloat16), implementation="picky_linear")
    want = linear.gated_delta_rule(*args, implementation="picky_linear")
    np.testing.assert_array_equal(got[0], want[0])
    with pytest.raises(ValueError, match=r"unknown linear attention implementation 'nope'"):
        linear.gated_delta_rule(*args, implementation="nope")


def test_chunked_xla_is_every_platforms_last_resort_and_recurrent_is_opt_in():
    for platform in ("cpu", "gpu", "tpu"):
        order = [k.name for k in linear.default_order(platform)]
        assert order[-1] == "chunked_xla" and "recurrent" not in order
    for name in ("chunked_xla", "recurrent"):
        kernel = linear.get_kernel(name)
        assert kernel.contract_version == linear.LINEAR_ATTENTION_CONTRACT_VERSION
        assert kernel.version == zoo_attention.__version__


def test_registration_checks_the_kind_and_the_contract_major():
    class Future(Picky):
        name = "future_linear"
        contract_version = "2.0"

    with pytest.raises(zoo_attention.KernelRegistrationError, match=r"linear attention contract 2"):
        linear.register_kernel(Future())
    with pytest.raises(zoo_attention.KernelRegistrationError, match="LinearAttentionKernel"):
        linear.register_kernel(zoo_attention.get_kernel("xla"))  # type: ignore[arg-type]


def test_the_final_state_continues_the_sequence():
    # Two halves, the second from the first's final state, give the whole sequence.
    q, k, v, g, beta = _args(t=150)
    whole, final = linear.gated_delta_rule(q, k, v, g, beta, normalize_qk=True)
    cut = 77
    first, state = linear.gated_delta_rule(
        *(x[:, :cut] for x in (q, k, v, g, beta)), normalize_qk=True
    )
    second, end = linear.gated_delta_rule(
        *(x[:, cut:] for x in (q, k, v, g, beta)), normalize_qk=True, initial_state=state
    )
    np.testing.assert_allclose(jnp.concatenate([first, second], 1), whole, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(end, final, atol=2e-5, rtol=2e-5)


def _temporaries(implementation: str, t: int) -> int:
    shapes = (
        jax.ShapeDtypeStruct((1, t, 2, 64), jnp.float32),
        jax.ShapeDtypeStruct((1, t, 2, 64), jnp.float32),
        jax.ShapeDtypeStruct((1, t, 2, 64), jnp.float32),
        jax.ShapeDtypeStruct((1, t, 2), jnp.float32),
        jax.ShapeDtypeStruct((1, t, 2), jnp.float32),
    )

    def loss(*args):
        out, state = linear.gated_delta_rule(*args, implementation=implementation)
        return jnp.sum(out) + jnp.sum(state)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))
    return grad.lower(*shapes).compile().memory_analysis().temp_size_in_bytes


def test_chunked_xla_memory_grows_linearly_with_the_sequence():
    # Forward and backward compiled at 2k and 8k tokens: four times the tokens, about four
    # times the temporaries (a state per chunk, not per token: the recurrence keeps one per
    # token, 64 times the chunked kernel's).
    small, large = _temporaries("chunked_xla", 2048), _temporaries("chunked_xla", 8192)
    assert 3.5 < large / small < 4.5, (small, large)
    per_token = 2 * 64 * 64 * 4  # a [64, 64] float32 state per head
    assert large < 8192 * per_token / 2, large
    assert _temporaries("recurrent", 2048) > 2048 * per_token
