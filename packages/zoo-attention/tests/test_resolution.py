"""Kernel resolution: explicit names, the ZOO_ATTENTION kill switch, fallback and the record."""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention import AttentionKernel
from zoo_attention._xla import KERNEL as XLA


class Picky(AttentionKernel):
    """Preferred on every platform, but serves only causal calls (and says so)."""

    name = "picky_test"
    version = "0.9.0"
    priority = 50

    def __init__(self):
        self.calls = 0

    def check(self, spec):
        return None if spec.is_causal else "only causal attention is supported"

    def __call__(self, q, k, v, ids, spec):
        self.calls += 1
        return XLA(q, k, v, ids, spec)


@pytest.fixture
def picky():
    """``picky_test`` registered, and no installed kernel but ``xla`` (so the default order is
    ``picky_test, xla`` whichever kernel packages this environment has)."""
    others = [k for name, k in zoo_attention.kernels().items() if name != "xla"]
    for other in others:
        zoo_attention.unregister_kernel(other.name)
    kernel = zoo_attention.register_kernel(Picky(), replace=True)
    yield kernel
    zoo_attention.unregister_kernel("picky_test")
    for other in others:
        zoo_attention.register_kernel(other, replace=True)


def _qkv(t=9):
    rng = np.random.default_rng()
    q = jnp.asarray(rng.standard_normal((1, t, 2, 8)), jnp.float32)
    return q, q, q


def test_default_order_prefers_higher_priority_kernel(picky, resolution_log):
    zoo_attention.dot_product_attention(*_qkv(), is_causal=True)
    res = resolution_log.last
    assert (res.kernel, res.version, res.source, res.skipped) == (
        "picky_test",
        "0.9.0",
        "default",
        (),
    )
    assert picky.calls == 1


def test_fallback_to_xla_warns_once_with_reason(picky, caplog, resolution_log):
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        for _ in range(3):
            out = zoo_attention.dot_product_attention(*_qkv())
    warnings = [r for r in caplog.records if "instead of" in r.getMessage()]
    assert len(warnings) == 1
    assert "picky_test" in warnings[0].getMessage() and "only causal" in warnings[0].getMessage()
    res = resolution_log.last
    assert res.kernel == "xla" and "only causal" in res.fallback_reason
    assert out.shape == (1, 9, 2, 8)


def test_explicit_kernel_that_cannot_serve_raises_its_reason(picky):
    with pytest.raises(zoo_attention.KernelUnavailableError, match="only causal"):
        zoo_attention.dot_product_attention(*_qkv(), implementation="picky_test")


def test_unknown_or_uninstalled_kernel_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown attention implementation 'not_installed'.*xla"):
        zoo_attention.dot_product_attention(*_qkv(), implementation="not_installed")


def test_env_kill_switch_forces_xla_without_code_change(picky, monkeypatch, resolution_log):
    monkeypatch.setenv("ZOO_ATTENTION", "xla")
    q, k, v = _qkv()
    got = zoo_attention.dot_product_attention(q, k, v, is_causal=True)
    res = resolution_log.last
    assert (res.kernel, res.source) == ("xla", "environment")
    assert picky.calls == 0
    monkeypatch.delenv("ZOO_ATTENTION")
    want = zoo_attention.dot_product_attention(q, k, v, is_causal=True)
    assert resolution_log.last.kernel == "picky_test"
    np.testing.assert_array_equal(got, want)


def test_env_list_is_tried_in_order(picky, monkeypatch, resolution_log):
    monkeypatch.setenv("ZOO_ATTENTION", "picky_test,xla")
    zoo_attention.dot_product_attention(*_qkv())  # not causal: picky refuses
    res = resolution_log.last
    assert res.kernel == "xla" and res.skipped[0][0] == "picky_test"
    monkeypatch.setenv("ZOO_ATTENTION", "picky_test")
    with pytest.raises(zoo_attention.KernelUnavailableError, match="only causal"):
        zoo_attention.dot_product_attention(*_qkv())


def test_env_entry_not_installed_falls_back_with_warning(monkeypatch, caplog, resolution_log):
    monkeypatch.setenv("ZOO_ATTENTION", "flash_nope,xla")
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        zoo_attention.dot_product_attention(*_qkv())
    res = resolution_log.last
    assert res.kernel == "xla"
    assert res.skipped[0][0] == "flash_nope"
    assert "not installed" in res.skipped[0][1]
    assert any("flash_nope" in r.getMessage() for r in caplog.records)


def test_env_naming_no_installed_kernel_is_an_error(monkeypatch):
    monkeypatch.setenv("ZOO_ATTENTION", "xal")
    with pytest.raises(ValueError, match=r"'xal' names no installed kernel; known kernels: .*xla"):
        zoo_attention.dot_product_attention(*_qkv())


def test_resolutions_are_recorded_for_jitted_calls(picky, resolution_log):
    q, k, v = _qkv()
    jax.jit(lambda q: zoo_attention.dot_product_attention(q, k, v, is_causal=True))(q)
    jax.jit(lambda q: zoo_attention.dot_product_attention(q, k, v))(q)
    kinds = [r.kernel for r in resolution_log.resolutions]
    assert kinds == ["picky_test", "xla"]
    assert resolution_log.resolutions[1].as_dict()["fallback_reason"].startswith("picky_test")


def test_a_kernel_whose_call_takes_no_query_offset_is_passed_over_for_one(
    picky, caplog, resolution_log
):
    """Contract 1.2: a kernel written before the query offset cannot be asked for one (its
    ``check`` never heard of it); the order falls back to ``xla`` saying why, and naming it
    raises with the reason."""
    q, k, v = _qkv(12)
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        out = zoo_attention.dot_product_attention(q[:, 4:], k, v, is_causal=True, query_offset=4)
    res = resolution_log.last
    assert res.kernel == "xla" and "query offset" in res.fallback_reason
    assert picky.calls == 0
    want = zoo_attention.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
    np.testing.assert_allclose(out, want[:, 4:], rtol=1e-6, atol=1e-6)
    with pytest.raises(zoo_attention.KernelUnavailableError, match="query offset"):
        zoo_attention.dot_product_attention(
            q[:, 4:], k, v, is_causal=True, query_offset=4, implementation="picky_test"
        )


def test_an_offset_without_a_positional_mask_asks_nothing_of_the_kernel(picky, resolution_log):
    q, k, v = _qkv()
    spec, _ = zoo_attention.make_spec(q, k, v, query_offset=3)
    assert not spec.has_query_offset and "query_offset" not in spec.features
    spec, _ = zoo_attention.make_spec(q, k, v, is_causal=True, query_offset=3)
    assert spec.has_query_offset and "query_offset" in spec.features


@pytest.mark.parametrize("bad", [-1, 1.5, True, jnp.zeros(2, jnp.int32)])
def test_a_bad_query_offset_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match="query_offset"):
        zoo_attention.dot_product_attention(*_qkv(), is_causal=True, query_offset=bad)


@pytest.mark.parametrize(
    ("feature", "words"),
    [("sinks", "attention sinks"), ("value_head_dim", "value head dim")],
)
def test_a_kernel_written_for_1_2_is_passed_over_for_a_1_3_feature(
    feature, words, picky, caplog, resolution_log
):
    """Contract 1.3: a kernel written before sinks and separate value head dims (no ``sinks``
    parameter, no ``separate_value_head_dim``) is never asked for them: the order falls back
    to ``xla`` with one warning naming the feature, and naming the kernel raises with it."""
    q, k, v = _qkv(12)
    kwargs: dict = {"is_causal": True}
    if feature == "sinks":
        kwargs["sinks"] = jnp.asarray(np.random.default_rng().standard_normal(2), jnp.float32)
    else:
        v = jnp.concatenate([v, v], axis=-1)  # values twice as wide as queries and keys
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        out = zoo_attention.dot_product_attention(q, k, v, **kwargs)
        zoo_attention.dot_product_attention(q, k, v, **kwargs)
    res = resolution_log.last
    assert res.kernel == "xla" and words in res.fallback_reason
    assert picky.calls == 0
    warnings = [r for r in caplog.records if words in r.getMessage()]
    assert len(warnings) == 1 and "picky_test" in warnings[0].getMessage()
    assert out.shape == (*q.shape[:3], v.shape[-1])
    with pytest.raises(zoo_attention.KernelUnavailableError, match=words):
        zoo_attention.dot_product_attention(q, k, v, implementation="picky_test", **kwargs)
    # Without the feature the kernel still serves (its contract is 1.2's and unchanged).
    zoo_attention.dot_product_attention(q, k, q, is_causal=True)
    assert resolution_log.last.kernel == "picky_test"


def test_features_of_1_3_are_named_in_the_spec():
    q, k, v = _qkv()
    spec, _ = zoo_attention.make_spec(q, k, v)
    assert spec.value_head_dim is None and not spec.has_sinks and spec.v_head_dim == 8
    wide = jnp.concatenate([v, v], axis=-1)
    spec, _ = zoo_attention.make_spec(q, k, wide, sinks=jnp.zeros(2))
    assert spec.features == ("sinks", "value_head_dim")
    assert (spec.head_dim, spec.v_head_dim) == (8, 16)
