"""The cross-entropy contract's registry and resolution: fused_xla by default everywhere,
ZOO_CROSS_ENTROPY=logits the kill switch, a kernel that refuses falls back loudly with its
reason, and every resolution is recorded under its own kind."""

import logging

import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention import cross_entropy
from zoo_attention.cross_entropy._fused_xla import KERNEL as FUSED

ENV = cross_entropy.ENV_VAR


class NoSoftCap(cross_entropy.CrossEntropyKernel):
    """Preferred on every platform, but serves no soft cap (and says so)."""

    name = "no_soft_cap_ce"
    version = "0.9.0"
    priority = 50

    def check(self, spec):
        return None if spec.soft_cap is None else "it has no final logit soft cap"

    def __call__(self, hidden, head, targets, loss_mask, spec):
        return FUSED(hidden, head, targets, loss_mask, spec)


@pytest.fixture
def picky(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    kernel = cross_entropy.register_kernel(NoSoftCap(), replace=True)
    yield kernel
    cross_entropy.unregister_kernel(kernel.name)


def _args():
    rng = np.random.default_rng(0)
    h = jnp.asarray(rng.standard_normal((2, 5, 8)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((8, 40)), jnp.float32)
    return h, w, jnp.asarray(rng.integers(0, 40, (2, 5)), jnp.int32)


def test_fused_xla_is_the_default_and_logits_the_fallback(monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    for platform in ("cpu", "gpu", "tpu"):
        order = cross_entropy.default_order(platform)
        names = [k.name for k in order]
        assert names[-1] == "logits" and "fused_xla" in names, names
        # Only an installed plug-in for this platform that ranks higher (zoo-tokamax on a TPU,
        # in the newest-JAX environment) comes before fused_xla.
        ahead = order[: names.index("fused_xla")]
        assert all(platform in k.platforms and k.priority > FUSED.priority for k in ahead), names
    assert cross_entropy.default_order("cpu")[0].name == "fused_xla"
    with zoo_attention.recording() as log:
        cross_entropy.linear_cross_entropy(*_args())
    assert [r.kernel for r in log.cross_entropy] == ["fused_xla"]
    assert log.last_of_kind("cross_entropy").source == "default"
    assert log.resolutions == [] and log.grouped_matmul == []


def test_kill_switch_brings_the_logits_back(monkeypatch) -> None:
    monkeypatch.setenv(ENV, "logits")
    with zoo_attention.recording() as log:
        ce, _ = cross_entropy.linear_cross_entropy(*_args())
    (resolution,) = log.cross_entropy
    assert (resolution.kernel, resolution.source) == ("logits", "environment")
    monkeypatch.setenv(ENV, "fused_xla")
    fused, _ = cross_entropy.linear_cross_entropy(*_args())
    np.testing.assert_allclose(np.asarray(ce), np.asarray(fused), rtol=1e-6, atol=1e-6)


def test_refusal_falls_back_loudly_with_the_reason(picky, caplog) -> None:
    h, w, t = _args()
    with zoo_attention.recording() as log, caplog.at_level(logging.WARNING, "zoo_attention"):
        cross_entropy.linear_cross_entropy(h, w, t)
        cross_entropy.linear_cross_entropy(h, w, t, soft_cap=5.0)
        cross_entropy.linear_cross_entropy(h, w, t, soft_cap=5.0)
    assert [r.kernel for r in log.cross_entropy] == ["no_soft_cap_ce", "fused_xla"]
    assert log.cross_entropy[1].fallback_reason == (
        "no_soft_cap_ce: it has no final logit soft cap"
    )
    warnings = [r.getMessage() for r in caplog.records if "instead of" in r.getMessage()]
    assert warnings == [
        "zoo_attention: using cross entropy fused_xla "
        f"{FUSED.version} instead of no_soft_cap_ce (no_soft_cap_ce: it has no final logit "
        "soft cap)"
    ]
    with pytest.raises(cross_entropy.KernelUnavailableError, match="no final logit soft cap"):
        cross_entropy.linear_cross_entropy(h, w, t, soft_cap=5.0, implementation=picky.name)


def test_environment_naming_nothing_installed_is_an_error(monkeypatch) -> None:
    monkeypatch.setenv(ENV, "no_such_kernel")
    with pytest.raises(ValueError, match="ZOO_CROSS_ENTROPY='no_such_kernel' names no installed"):
        cross_entropy.linear_cross_entropy(*_args())


def test_leading_shape_and_mask_of_numbers() -> None:
    h, w, t = _args()
    mask = jnp.asarray([[1.0, 0.0, 2.0, 1.0, 0.0]] * 2)
    ce, log_z = cross_entropy.linear_cross_entropy(h, w, t, loss_mask=mask)
    assert ce.shape == log_z.shape == (2, 5)
    assert float(jnp.abs(ce[:, 1]).sum() + jnp.abs(log_z[:, 4]).sum()) == 0.0
    full, _ = cross_entropy.linear_cross_entropy(h, w, t)
    np.testing.assert_allclose(np.asarray(ce[:, 2]), np.asarray(full[:, 2]), rtol=1e-6)
