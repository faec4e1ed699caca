"""Where megablox serves and why not: its one-line reasons, the default orders, and the
fallback a CPU host without interpret mode takes."""

import dataclasses
import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from zoo_attention import grouped
from zoo_megablox import INTERPRET_VAR, KERNEL, MegabloxKernel, Tiling

SPEC = grouped.GroupedMatmulSpec(
    m=4096, k=1024, n=2048, groups=8, dtype="bfloat16", platform="tpu", device_kind="TPU v5 lite"
)


def _args(rng, dtype=jnp.float32):
    lhs = jnp.asarray(rng.standard_normal((40, 24)), dtype)
    rhs = jnp.asarray(rng.standard_normal((4, 24, 16)), dtype)
    return lhs, rhs, jnp.asarray([0, 7, 0, 20], jnp.int32)


def test_without_interpret_mode_a_cpu_host_falls_back_to_ragged_dot_with_one_warning(
    monkeypatch, caplog, resolution_log
):
    monkeypatch.delenv(INTERPRET_VAR)
    monkeypatch.setenv(grouped.ENV_VAR, "megablox,ragged_dot")
    lhs, rhs, sizes = _args(np.random.default_rng())
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        got = [grouped.grouped_matmul(lhs, rhs, sizes) for _ in range(3)]
    warnings = [r.getMessage() for r in caplog.records if "instead of" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "ragged_dot" in warnings[0] and "megablox" in warnings[0]
    assert f"needs a TPU (the target is 'cpu'); set {INTERPRET_VAR}=1" in warnings[0]
    (res,) = resolution_log.grouped_matmul
    assert (res.kernel, res.source) == ("ragged_dot", "environment")
    assert res.fallback_reason.startswith("megablox: needs a TPU")
    want = grouped.grouped_matmul(lhs, rhs, sizes, implementation="ragged_dot")
    np.testing.assert_array_equal(got[0], want)


def test_named_on_a_cpu_host_without_interpret_mode_it_raises_its_reason(monkeypatch):
    monkeypatch.delenv(INTERPRET_VAR)
    with pytest.raises(grouped.KernelUnavailableError, match=r"megablox .* needs a TPU"):
        grouped.grouped_matmul(*_args(np.random.default_rng()), implementation="megablox")


def test_it_leads_the_tpu_default_order_and_only_in_interpret_mode_the_cpus(monkeypatch):
    assert grouped.default_order("tpu")[0].name == "megablox"
    assert grouped.default_order("cpu")[0].name == "megablox"  # interpret mode is on here
    monkeypatch.delenv(INTERPRET_VAR)
    assert "megablox" not in [k.name for k in grouped.default_order("cpu")]
    assert KERNEL.check(SPEC) is None
    assert KERNEL.partitionable is False  # a Mosaic call


def test_one_sentence_reasons_for_dtypes_and_tilings():
    assert KERNEL.check(dataclasses.replace(SPEC, dtype="float16")) == (
        "dtype float16 is not supported (float32 or bfloat16)"
    )
    fixed = MegabloxKernel(tiling=Tiling(120, 256, 256))
    reason = fixed.check(SPEC)
    assert reason is not None and "tm must be a multiple of 16" in reason
    assert MegabloxKernel(tiling=Tiling(128, 256, 200)).check(SPEC) is not None  # tn not lanes
    assert MegabloxKernel(tiling=Tiling(256, 512, 512)).check(SPEC) is None


def test_a_fixed_tiling_serves_and_agrees_with_the_policys(resolution_log):
    rng = np.random.default_rng()
    lhs, rhs, sizes = _args(rng)
    fixed = MegabloxKernel(tiling=Tiling(8, 128, 128))  # float32: 8-row tiles, five of them
    spec = grouped.make_spec(lhs, rhs, sizes)
    got = jax.jit(lambda a, b, s: fixed(a, b, s, spec))(lhs, rhs, sizes)
    want = grouped.grouped_matmul(lhs, rhs, sizes, implementation="megablox")
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert np.all(np.asarray(got)[27:] == 0)


def test_the_call_carries_the_contract_scope_and_its_own():
    lhs, rhs, sizes = _args(np.random.default_rng(), jnp.bfloat16)
    fn = jax.jit(lambda a: grouped.grouped_matmul(a, rhs, sizes, implementation="megablox"))
    text = fn.lower(lhs).as_text(debug_info=True)
    assert grouped.scope_name("megablox", KERNEL.version) in text
    assert "zoo_megablox.gmm" in text


def test_inside_a_shard_map_that_checks_varying_axes_it_equals_ragged_dot():
    """A mixture-of-experts layer calls it inside its own shard_map (check_vma on), where
    megablox's Pallas call cannot type its output: forward and gradients there, on a mesh of
    this one device, against ragged_dot outside."""
    rng = np.random.default_rng()
    lhs, rhs, sizes = _args(rng)
    cot = jnp.asarray(rng.standard_normal((40, 16)), jnp.float32)
    mesh = jax.make_mesh((1,), ("experts",), axis_types=(jax.sharding.AxisType.Auto,))

    def run(implementation: str, sharded: bool):
        def mm(a, b):
            return grouped.grouped_matmul(a, b, sizes, implementation=implementation)

        if sharded:
            mm = jax.shard_map(mm, mesh=mesh, in_specs=(P("experts"), P()), out_specs=P("experts"))
        loss = lambda a, b: jnp.sum(mm(a, b) * cot)
        return jax.jit(lambda a, b: (mm(a, b), jax.grad(loss, argnums=(0, 1))(a, b)))(lhs, rhs)

    got, (dlhs, drhs) = run("megablox", sharded=True)
    want, (want_dlhs, want_drhs) = run("ragged_dot", sharded=False)
    for a, b in ((got, want), (dlhs, want_dlhs), (drhs, want_drhs)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(got)[27:] == 0) and np.all(np.asarray(dlhs)[27:] == 0)
