"""flash_tpu kernel behaviour beyond the shared suite: block skipping, races, overrides, sharding."""

from __future__ import annotations

import importlib.metadata

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flash_helpers import inputs, max_error, xla_vjp
from jax._src.pallas.mosaic.interpret import interpret_pallas_call
from jax.experimental.pallas import tpu as pltpu
from jax.sharding import Mesh

import zoo_attention
from zoo_flash_tpu import BlockSizes, flash_attention, sharded_flash_attention

POISONED = pltpu.InterpretParams(uninitialized_memory="nan")


def _flash_vjp(q, k, v, do, *, interpret=POISONED, **kwargs):  # type: ignore[no-untyped-def]
    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return flash_attention(q, k, v, interpret=interpret, **kwargs)

    out, vjp = jax.vjp(jax.jit(attend), q, k, v)
    return (out, *vjp(do))


def _contract_kwargs(kwargs: dict) -> dict:
    return {
        "is_causal": kwargs.get("is_causal", False),
        "local_window_size": kwargs.get("local_window"),
        "logits_soft_cap": kwargs.get("logits_soft_cap"),
        "segment_ids": kwargs.get("segment_ids"),
        "scale": kwargs.get("scale"),
    }


@pytest.mark.parametrize(
    ("t", "s", "kwargs", "first_unseen"),
    [
        # test_invisible_compute_sub_blocks_are_never_computed[forward] runs these causal
        # shapes with NaN keys and checks all four outputs.
        pytest.param(128, 512, {"is_causal": True}, 128, marks=pytest.mark.full),
        (128, 640, {"local_window": (3, 5)}, 256),
        (256, 512, {"segments": True}, 128),
    ],
    ids=["causal", "window", "segments"],
)
def test_fully_masked_blocks_are_never_computed(
    t: int, s: int, kwargs: dict, first_unseen: int
) -> None:
    """Keys no query can see hold NaN: any matmul over their blocks would spread it (0 * NaN)."""
    rng = np.random.default_rng()
    q, k, v, do = inputs(rng, 1, t, s, 2, 1, 64)
    if kwargs.pop("segments", False):
        kv_ids = jnp.where(jnp.arange(s) < first_unseen, 0, 1)[None].astype(jnp.int32)
        kwargs["segment_ids"] = (jnp.zeros((1, t), jnp.int32), kv_ids)
    unseen = (jnp.arange(s) >= first_unseen)[None, :, None, None]
    out, dq, dk, dv = _flash_vjp(
        q, jnp.where(unseen, jnp.nan, k), jnp.where(unseen, jnp.nan, v), do, **kwargs
    )
    want = xla_vjp(
        q, jnp.where(unseen, 0.0, k), jnp.where(unseen, 0.0, v), do, **_contract_kwargs(kwargs)
    )
    for got, ref in zip((out, dq, dk, dv), want, strict=True):
        assert np.all(np.isfinite(np.asarray(got)))
        assert max_error(got, ref) < 1e-4
    assert not np.any(np.asarray(dk[:, first_unseen:])) and not np.any(
        np.asarray(dv[:, first_unseen:])
    )


@pytest.mark.parametrize(
    ("blocks", "checked"),
    [
        (BlockSizes(128, 256, 128, 128, block_kv_compute=128), 4),  # forward in sub-blocks
        (BlockSizes(128, 128, 128, 256, block_kv_bwd_compute=128), 2),  # dQ in sub-blocks
    ],
    ids=["forward", "dq"],
)
def test_invisible_compute_sub_blocks_are_never_computed(blocks: BlockSizes, checked: int) -> None:
    """Keys 128.. of the first 256-key block are NaN and seen by no query: its second compute
    sub-block must be skipped, or ``p @ v`` and ``ds @ k`` would spread the NaN (0 * NaN).

    The dK/dV kernel computes whole blocks, so with 256-key backward blocks only the output
    and dQ are checked.
    """
    rng = np.random.default_rng()
    q, k, v, do = inputs(rng, 1, 128, 512, 2, 1, 64)
    unseen = (jnp.arange(512) >= 128)[None, :, None, None]
    got = _flash_vjp(
        q, jnp.where(unseen, jnp.nan, k), jnp.where(unseen, jnp.nan, v), do,
        is_causal=True, block_sizes=blocks,
    )  # fmt: skip
    want = xla_vjp(q, jnp.where(unseen, 0.0, k), jnp.where(unseen, 0.0, v), do, is_causal=True)
    for a, b in list(zip(got, want, strict=True))[:checked]:
        assert np.all(np.isfinite(np.asarray(a)))
        assert max_error(a, b) < 1e-4


# Group 4 runs the same sub-block code with a group of heads per step.
@pytest.mark.parametrize("group", [pytest.param(1, marks=pytest.mark.full), 4])
def test_compute_sub_blocks_agree_with_the_reference(group: int) -> None:
    """Forward and dQ key blocks computed 128 keys at a time, with every feature at once:
    causal, window, segment ids, soft cap and GQA; against the ``xla`` kernel."""
    rng = np.random.default_rng()
    t = 600
    q, k, v, do = inputs(rng, 1, t, t, 4, 4 // group, 64)
    cuts = np.sort(rng.choice(np.arange(1, t), size=3, replace=False))
    ids = jnp.asarray(np.searchsorted(cuts, np.arange(t), side="right")[None])
    kwargs = {
        "is_causal": True,
        "local_window": (int(rng.integers(200, 400)), 0),
        "logits_soft_cap": 5.0,
        "segment_ids": (ids, ids),
    }
    blocks = BlockSizes(128, 512, 128, 256, block_kv_compute=128, block_kv_bwd_compute=128)
    got = _flash_vjp(q, k, v, do, block_sizes=blocks, **kwargs)
    want = xla_vjp(q, k, v, do, **_contract_kwargs(kwargs))
    for a, b in zip(got, want, strict=True):
        assert max_error(a, b) < 1e-4


def test_interleaved_segments_agree_with_the_reference() -> None:
    """Ids that are not sorted (three sequences interleaved in 128-token runs) leave blocks that
    share no segment inside visited ranges; the fetch table sends those steps to other blocks
    (forward, dQ: key blocks; dK/dV: query blocks), and the answer must not change.

    Each row's runs are ``a, b, c, a`` for a random order of the three ids, so the last query
    block always sees the first key block past two that share none of its segment."""
    rng = np.random.default_rng()
    t = 512
    q, k, v, do = inputs(rng, 2, t, t, 4, 2, 64)
    runs = np.stack([np.r_[order, order[:1]] for order in (rng.permutation(3) for _ in range(2))])
    ids = jnp.asarray(np.repeat(runs, 128, axis=1), jnp.int32)
    kwargs = {"is_causal": True, "segment_ids": (ids, ids)}
    got = _flash_vjp(q, k, v, do, **kwargs)
    want = xla_vjp(q, k, v, do, **_contract_kwargs(kwargs))
    for a, b in zip(got, want, strict=True):
        assert max_error(a, b) < 1e-4


def test_no_races_with_two_cores() -> None:
    """The race detector sees no conflicting accesses when parallel grid axes split over 2 cores."""
    rng = np.random.default_rng()
    q, k, v, do = inputs(rng, 2, 200, 200, 4, 2, 64)
    ids = jnp.asarray(np.repeat([[0, 1]], [120, 80], axis=1).repeat(2, 0), jnp.int32)
    params = pltpu.InterpretParams(
        detect_races=True, num_cores_or_threads=2, uninitialized_memory="nan"
    )
    kwargs = {"is_causal": True, "segment_ids": (ids, ids)}
    got = _flash_vjp(q, k, v, do, interpret=params, **kwargs)
    jax.block_until_ready(got)
    assert interpret_pallas_call.races is not None
    assert not interpret_pallas_call.races.races_found
    want = xla_vjp(q, k, v, do, **_contract_kwargs(kwargs))
    assert max(max_error(a, b) for a, b in zip(got, want, strict=True)) < 1e-4


@pytest.mark.parametrize(
    "blocks",
    [
        # Uneven blocks the other way round: q128-kv256 pads to the same lcm.
        pytest.param(BlockSizes(256, 128, 128, 256), marks=pytest.mark.full),
        BlockSizes(128, 256, 256, 128),
    ],
    ids=["q256-kv128", "q128-kv256"],
)
def test_block_size_overrides(blocks: BlockSizes) -> None:
    """Uneven forward/backward block sizes (padding to their lcm) give the same answer."""
    rng = np.random.default_rng()
    q, k, v, do = inputs(rng, 1, 300, 280, 4, 1, 96)
    kwargs = {"is_causal": True, "local_window": (70, 10), "logits_soft_cap": 6.0}
    got = _flash_vjp(q, k, v, do, block_sizes=blocks, **kwargs)
    want = xla_vjp(q, k, v, do, **_contract_kwargs(kwargs))
    for a, b in zip(got, want, strict=True):
        assert max_error(a, b) < 1e-4


# The conformance case h128-causal-segments-bf16 runs the same kernels in bfloat16 at 128-wide
# heads and checks the dtype and the tolerance.
@pytest.mark.full
def test_bfloat16_stays_bfloat16_and_close() -> None:
    rng = np.random.default_rng()
    q, k, v, do = inputs(rng, 1, 160, 160, 4, 2, 128, jnp.bfloat16)
    got = _flash_vjp(q, k, v, do, is_causal=True)
    want = xla_vjp(*(x.astype(jnp.float32) for x in (q, k, v, do)), is_causal=True)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == jnp.bfloat16
        assert max_error(a.astype(jnp.float32), b) < 4e-2 * max(1.0, float(jnp.max(jnp.abs(b))))


def test_sharded_over_batch_and_heads() -> None:
    """The shard_map wrapper (batch/head specs, MQA keys replicated) agrees with the reference.

    Interpret mode runs on one host device here (its multi-device simulation would need one
    thread per device); the compile tests partition the same wrapper over a 2x2 TPU mesh.
    """
    devices = np.asarray(jax.devices()[:1])
    rows = 1
    mesh = Mesh(devices.reshape(1, 1), ("data", "model"))
    heads = 2 * mesh.shape["model"]
    rng = np.random.default_rng()
    for kv_heads in (heads, 1):
        q, k, v, do = inputs(rng, 2 * rows, 130, 130, heads, kv_heads, 64)

        def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            return sharded_flash_attention(q, k, v, mesh, is_causal=True, interpret=POISONED)

        out, vjp = jax.vjp(jax.jit(attend), q, k, v)
        got = (out, *vjp(do))
        want = xla_vjp(q, k, v, do, is_causal=True)
        for a, b in zip(got, want, strict=True):
            assert max_error(a, b) < 1e-4


def test_sharding_rejects_unknown_axes() -> None:
    mesh = Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("data", "model"))
    q = jnp.zeros((1, 8, 3, 64))
    with pytest.raises(ValueError, match="mesh has no axis 'heads'"):
        sharded_flash_attention(q, q, q, mesh, head_axis="heads")


def test_named_scopes_in_lowered_hlo() -> None:
    """The contract's scope (kernel name and version) and the kernel's own scope are in the HLO."""
    kernel = zoo_attention.get_kernel("flash_tpu")
    q = jnp.zeros((1, 16, 2, 64))
    fn = jax.jit(lambda q: zoo_attention.dot_product_attention(q, q, q, implementation="flash_tpu"))
    text = fn.lower(q).as_text(debug_info=True)
    assert zoo_attention.scope_name("flash_tpu", kernel.version) in text
    assert "zoo_flash_tpu.flash_attention" in text
    # The version in the scope is the installed distribution's, not a constant in the code.
    assert kernel.version == importlib.metadata.version("zoo-flash-tpu")
    assert f"flash_tpu-{kernel.version}" in text


def test_functional_entry_point_rejects_bad_arguments() -> None:
    q = jnp.zeros((1, 8, 4, 64))
    kv = jnp.zeros((1, 8, 3, 64))
    with pytest.raises(ValueError, match="multiple of key/value heads"):
        flash_attention(q, kv, kv, interpret=POISONED)
    with pytest.raises(ValueError, match="local_window"):
        flash_attention(q, q, q, local_window=(-1, 2), interpret=POISONED)
    with pytest.raises(ValueError, match="bfloat16"):
        flash_attention(
            q.astype(jnp.float16), q.astype(jnp.float16), q.astype(jnp.float16), interpret=POISONED
        )
