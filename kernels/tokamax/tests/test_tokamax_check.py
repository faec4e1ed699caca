"""What tokamax cannot serve, its check refuses before tracing, and the contract falls back
loudly to fused_xla with the reason."""

import logging

import jax.numpy as jnp
import pytest
from zoo_tokamax import CROSS_ENTROPY_KERNEL, tpu_generation

from zoo_attention import cross_entropy
from zoo_attention.cross_entropy.testing import CASES, make_inputs


def _spec(**kwargs):
    """A call's spec, targeted at a TPU v5e unless ``kwargs`` say otherwise."""
    h = jnp.zeros((16, 64), jnp.bfloat16)
    head = jnp.zeros((64, 300) if kwargs.get("head_layout", "dv") == "dv" else (300, 64))
    kwargs = {"platform": "tpu", "device_kind": "TPU v5 lite", **kwargs}
    return cross_entropy.make_spec(h, head, jnp.zeros((16,), jnp.int32), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"head_layout": "vd"}, "transposed copy of the whole head"),
        ({"soft_cap": 30.0}, "no final logit soft cap"),
        ({"temperature": 0.7}, "no temperature"),
        ({"platform": "tpu", "device_kind": "TPU v4"}, "TPU v5 or newer"),
    ],
)
def test_refuses_what_it_lacks(kwargs, reason) -> None:
    assert reason in (CROSS_ENTROPY_KERNEL.check(_spec(**kwargs)) or "")


def test_serves_an_untied_head_on_v5e_v5p_v6e() -> None:
    for kind in ("TPU v5 lite", "TPU v5p", "TPU v6 lite"):
        assert CROSS_ENTROPY_KERNEL.check(_spec(platform="tpu", device_kind=kind)) is None
    assert [tpu_generation(k) for k in ("TPU v4", "TPU v5 lite", "TPU v6e")] == [4, 5, 6]


def test_a_tied_head_on_a_tpu_falls_back_to_fused_xla_with_the_reason(
    resolution_log, caplog
) -> None:
    assert [k.name for k in cross_entropy.default_order("tpu")][:2] == ["tokamax", "fused_xla"]
    with caplog.at_level(logging.WARNING, "zoo_attention"):
        cross_entropy.resolve(_spec(head_layout="vd"))
    (res,) = resolution_log.cross_entropy
    assert res.kernel == "fused_xla"
    assert "tokamax: tokamax takes the head as [D, V]" in (res.fallback_reason or "")
    assert any("instead of tokamax" in r.getMessage() for r in caplog.records)


def test_of_the_conformance_cases_it_serves_the_untied_ones_with_plain_logits() -> None:
    served = []
    for case in CASES:
        x = make_inputs(case, 0)
        spec = cross_entropy.make_spec(
            x.hidden, x.head, x.targets, x.loss_mask, head_layout=case.head_layout,
            soft_cap=case.soft_cap, temperature=case.temperature, platform="tpu",
            device_kind="TPU v5 lite",
        )  # fmt: skip
        if CROSS_ENTROPY_KERNEL.check(spec) is None:
            served.append(case.name)
    want = [
        c.name
        for c in CASES
        if c.head_layout == "dv" and c.soft_cap is None and c.temperature == 1.0
    ]
    assert served == want and len(served) >= 4, served


def test_it_needs_a_tpu() -> None:
    assert "needs a TPU" in (CROSS_ENTROPY_KERNEL.check(_spec(platform="cpu")) or "")
