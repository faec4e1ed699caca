"""Contract 1.2 on a mesh with a ``context`` axis: each device's block of queries against the
all-gathered keys and values gives float64 reference attention, values and gradients, with
packed documents that cross the blocks, causal and window masks, and the load-balanced layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import zoo_attention
from zoo_attention.context import dual_chunk_order, natural_order
from zoo_attention.testing import reference_attention

B, T, N, K, H = 2, 64, 4, 2, 8


def _mesh(shape: tuple[int, ...], names: tuple[str, ...]):
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(names))


def _inputs(seed: int):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((B, T, N, H)).astype(np.float32)
    k, v = (rng.standard_normal((B, T, K, H)).astype(np.float32) for _ in range(2))
    # Documents of 5 to 30 tokens: most cross a block boundary (blocks of 16 or 8).
    ids = np.zeros((B, T), np.int32)
    for row in range(B):
        pos, doc = 0, 0
        while pos < T:
            n = int(rng.integers(5, 30))
            ids[row, pos : pos + n] = doc
            pos, doc = pos + n, doc + 1
    cot = rng.standard_normal((B, T, N, H)).astype(np.float32)
    return q, k, v, ids, cot


CASES = [
    pytest.param({"is_causal": True}, id="causal"),
    pytest.param({"is_causal": True, "local_window_size": (12, 0)}, id="sliding-window"),
    pytest.param({"local_window_size": 9}, id="two-sided-window"),
]


def _run(impl: str | None, mask: dict, mesh, q, k, v, ids, cot, *, balanced: bool = False):
    def attend(q, k, v, ids):
        return zoo_attention.dot_product_attention(
            q, k, v, segment_ids=ids, implementation=impl, **mask
        )

    def fwd_bwd(q, k, v, ids, cot):
        out, vjp = jax.vjp(lambda q, k, v: attend(q, k, v, ids), q, k, v)
        return out, vjp(cot)

    seq = NamedSharding(mesh, P("data", "context"))
    place = lambda x: jax.device_put(jnp.asarray(x), seq)
    with jax.set_mesh(mesh), zoo_attention.partition_axes(batch="data", balanced=balanced):
        fn = jax.jit(fwd_bwd)
        text = fn.lower(*map(place, (q, k, v, ids, cot))).as_text()
        out, grads = fn(*map(place, (q, k, v, ids, cot)))
    return np.asarray(out), [np.asarray(g) for g in grads], text


def _layouts():
    """Each kernel with each mask once, the layouts alternating, so each kernel and each mask
    meets both layouts; the other layout of each pair is `full` (its path kept beside it)."""
    for i, impl in enumerate(["xla", "chunked"]):
        for j, case in enumerate(CASES):
            for balanced in (False, True):
                keep = (i + j + balanced) % 2 == 0
                layout = "balanced" if balanced else "contiguous"
                # The other layout of this kernel and mask: kept in the case beside it.
                marks = () if keep else (pytest.mark.full,)
                yield pytest.param(impl, case.values[0], balanced, marks=marks,
                                   id=f"{layout}-{impl}-{case.id}")  # fmt: skip


@pytest.mark.parametrize(("impl", "mask", "balanced"), list(_layouts()))
def test_sequence_sharded_attention_matches_the_reference(impl, mask, balanced):
    q, k, v, ids, cot = _inputs(np.random.default_rng().integers(1 << 30))
    want = reference_attention(q, k, v, segment_ids=ids, cotangent=cot, **mask)
    mesh = _mesh((2, 4), ("data", "context"))
    order = dual_chunk_order(T, 4) if balanced else np.arange(T)
    lay = lambda x: x[:, order]
    out, grads, text = _run(impl, mask, mesh, *map(lay, (q, k, v, ids, cot)), balanced=balanced)
    back = natural_order(T, 4) if balanced else np.arange(T)
    assert "all-gather" in text or "all_gather" in text
    np.testing.assert_allclose(out[:, back], want.out, rtol=2e-5, atol=2e-5)
    for got, ref in zip(grads, (want.dq, want.dk, want.dv), strict=True):
        np.testing.assert_allclose(got[:, back], ref, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    ("mask", "balanced"),
    [
        pytest.param(CASES[0].values[0], False, id="causal-contiguous"),
        # The balanced layout on flash_tpu: kept in test_sinks_and_wider_values...[flash_tpu].
        pytest.param(CASES[0].values[0], True, id="causal-balanced", marks=pytest.mark.full),
        # Same mask, layout and kernel as the kept test_sinks_and_wider_values...[flash_tpu].
        pytest.param(
            CASES[1].values[0], True, id="sliding-window-balanced", marks=pytest.mark.full
        ),
    ],
)
def test_flash_tpu_runs_each_shard_with_its_static_offset(mask, balanced, monkeypatch):
    """flash_tpu plans its grid from the offset, so it takes it as an int: the contract runs
    one ``lax.switch`` branch per shard (generic Pallas interpret mode under ``shard_map``),
    and the result is float64 reference attention and its gradients."""
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    q, k, v, ids, cot = _inputs(np.random.default_rng().integers(1 << 30))
    want = reference_attention(q, k, v, segment_ids=ids, cotangent=cot, **mask)
    mesh = _mesh((2, 4), ("data", "context"))
    order = dual_chunk_order(T, 4) if balanced else np.arange(T)
    lay = lambda x: x[:, order]
    with zoo_attention.recording() as log:
        out, grads, text = _run(
            "flash_tpu", mask, mesh, *map(lay, (q, k, v, ids, cot)), balanced=balanced
        )
    assert {r.kernel for r in log.resolutions} == {"flash_tpu"}
    assert "case" in text  # the switch over shards
    back = natural_order(T, 4) if balanced else np.arange(T)
    np.testing.assert_allclose(out[:, back], want.out, rtol=2e-5, atol=2e-5)
    for got, ref in zip(grads, (want.dq, want.dk, want.dv), strict=True):
        np.testing.assert_allclose(got[:, back], ref, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("impl", ["xla", "chunked", "flash_tpu"])
def test_sinks_and_wider_values_on_a_context_axis(impl, monkeypatch):
    """Contract 1.3 on a sequence split over devices: sinks (split over no head axis here,
    replicated) and values wider than the queries, with packed documents and a sliding window,
    load-balanced; values, dQ/dK/dV and d sinks against the float64 reference."""
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    rng = np.random.default_rng(np.random.default_rng().integers(1 << 30))
    q, k, _, ids, _ = _inputs(int(rng.integers(1 << 30)))
    v = rng.standard_normal((B, T, K, 12)).astype(np.float32)
    cot = rng.standard_normal((B, T, N, 12)).astype(np.float32)
    sinks = (2 * rng.standard_normal(N)).astype(np.float32)
    mask = {"is_causal": True, "local_window_size": (12, 0)}
    want = reference_attention(q, k, v, segment_ids=ids, sinks=sinks, cotangent=cot, **mask)
    mesh = _mesh((2, 4), ("data", "context"))
    order, back = dual_chunk_order(T, 4), natural_order(T, 4)

    def fwd_bwd(q, k, v, ids, sinks, cot):
        def attend(q, k, v, sinks):
            return zoo_attention.dot_product_attention(
                q, k, v, segment_ids=ids, sinks=sinks, implementation=impl, **mask
            )

        out, vjp = jax.vjp(attend, q, k, v, sinks)
        return out, vjp(cot)

    seq = NamedSharding(mesh, P("data", "context"))
    place = lambda x: jax.device_put(jnp.asarray(x[:, order]), seq)
    with jax.set_mesh(mesh), zoo_attention.partition_axes(batch="data", balanced=True):
        out, (dq, dk, dv, dsinks) = jax.jit(fwd_bwd)(
            *map(place, (q, k, v, ids)), jnp.asarray(sinks), place(cot)
        )
    np.testing.assert_allclose(np.asarray(out)[:, back], want.out, rtol=2e-5, atol=2e-5)
    for got, ref in zip((dq, dk, dv), (want.dq, want.dk, want.dv), strict=True):
        np.testing.assert_allclose(np.asarray(got)[:, back], ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(dsinks), want.dsinks, rtol=2e-5, atol=2e-4)
