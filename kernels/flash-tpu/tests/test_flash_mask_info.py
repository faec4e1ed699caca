"""Block ranges and block predicates against a brute-force element mask (NumPy)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flash_helpers import element_mask

from zoo_flash_tpu._config import FlashConfig
from zoo_flash_tpu._layout import padded_ids
from zoo_flash_tpu._mask import block_any_visible, block_fully_visible
from zoo_flash_tpu._mask_info import kv_ranges, q_ranges, segment_bounds, visited_blocks
from zoo_flash_tpu._policy import BlockSizes


def _cfg(t: int, s: int, bq: int, bk: int, **kw) -> FlashConfig:  # type: ignore[no-untyped-def]
    return FlashConfig(
        batch=kw.pop("batch", 1), q_len=t, kv_len=s, num_heads=1, num_kv_heads=1, head_dim=64,
        dtype="float32", scale=1.0, causal=kw.pop("causal", False), window=kw.pop("window", None),
        soft_cap=None, has_segments=kw.pop("segments", False), blocks=BlockSizes(bq, bk, bq, bk),
        vmem_limit_bytes=0,
    )  # fmt: skip


CONFIGS = [
    {"t": 300, "s": 300, "causal": True},
    {"t": 1000, "s": 1000, "window": (100, 0)},
    {"t": 700, "s": 900, "window": (5, 300)},
    {"t": 130, "s": 700, "causal": True, "window": (0, 40)},
    {"t": 512, "s": 512, "segments": True, "batch": 3},
    {"t": 640, "s": 640, "causal": True, "segments": True, "window": (200, 0), "batch": 2},
]


@pytest.mark.parametrize("conf", CONFIGS, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
@pytest.mark.parametrize(("bq", "bk"), [(128, 128), (256, 128), (128, 384)])
def test_ranges_cover_every_visible_block_and_no_more(conf: dict, bq: int, bk: int) -> None:
    conf = dict(conf)
    t, s = conf.pop("t"), conf.pop("s")
    cfg = _cfg(t, s, bq, bk, **conf)
    rng = np.random.default_rng()
    q_ids = kv_ids = bounds = None
    if cfg.has_segments:
        # Packed documents, plus a stretch of query ids no key has.
        cuts = np.sort(rng.integers(1, t, size=(cfg.batch, 3)), axis=1)
        q_raw = np.stack([np.searchsorted(c, np.arange(t), side="right") for c in cuts])
        kv_raw = q_raw[:, :s] if s <= t else np.pad(q_raw, ((0, 0), (0, s - t)), mode="edge")
        q_raw[:, : t // 5] = 50
        q_ids = np.asarray(padded_ids(jnp.asarray(q_raw, jnp.int32), cfg.q_len_padded))
        kv_ids = np.asarray(padded_ids(jnp.asarray(kv_raw, jnp.int32), cfg.kv_len_padded))
        bounds = segment_bounds(jnp.asarray(q_ids), jnp.asarray(kv_ids), bq, bk)
    mask = element_mask(cfg, q_ids, kv_ids)
    nq, nk = cfg.q_len_padded // bq, cfg.kv_len_padded // bk
    blocks = mask.reshape(cfg.batch, nq, bq, nk, bk).any(axis=(2, 4))  # [B, nq, nk]

    fwd = kv_ranges(cfg, bq, bk, bounds)
    lo, hi = np.asarray(fwd.lo).reshape(cfg.batch, nq), np.asarray(fwd.hi).reshape(cfg.batch, nq)
    inner = np.arange(nk)
    in_range = (inner >= lo[..., None]) & (inner <= hi[..., None])
    assert not np.any(blocks & ~in_range), "a block with visible pairs lies outside its row's range"
    assert np.all(hi - lo + 1 <= fwd.steps)
    if not cfg.has_segments:  # exact for position structure: both ends are needed blocks
        rows = blocks.any(-1)
        assert np.array_equal(hi >= lo, rows)
        b_idx, q_idx = np.nonzero(rows)
        assert np.all(blocks[b_idx, q_idx, lo[rows]]) and np.all(blocks[b_idx, q_idx, hi[rows]])
        assert visited_blocks(cfg, bq, bk) == int(np.sum(in_range[0]))

    bwd = q_ranges(cfg, bq, bk, bounds)
    lo, hi = np.asarray(bwd.lo).reshape(cfg.batch, nk), np.asarray(bwd.hi).reshape(cfg.batch, nk)
    outer = np.arange(nq)
    in_range = (outer >= lo[..., None]) & (outer <= hi[..., None])  # [B, nk, nq]
    assert not np.any(blocks.transpose(0, 2, 1) & ~in_range)
    if not cfg.has_segments:
        cols = blocks.any(1)
        assert np.array_equal(hi >= lo, cols)


@pytest.mark.parametrize("conf", CONFIGS[:4], ids=str)
def test_full_blocks_need_no_mask(conf: dict) -> None:
    """Where the predicate says "fully visible", every pair of the block is visible by position."""
    conf = dict(conf)
    t, s = conf.pop("t"), conf.pop("s")
    bq = bk = 128
    cfg = _cfg(t, s, bq, bk, **conf)
    mask = element_mask(cfg, None, None)[0]
    # Padded query rows need no mask: count them as visible.
    mask[t:] = True
    mask[t:, s:] = False
    saw_full = False
    for i in range(cfg.q_len_padded // bq):
        for j in range(cfg.kv_len_padded // bk):
            full = bool(block_fully_visible(i * bq, i * bq + bq - 1, j * bk, j * bk + bk - 1, cfg))
            block = mask[i * bq : (i + 1) * bq, j * bk : (j + 1) * bk]
            if full:
                saw_full = True
                assert block.all()
            elif j * bk + bk <= s:  # a block of real keys the predicate calls partial has a gap
                assert not block.all()
    assert saw_full or cfg.window is not None


@pytest.mark.parametrize(
    "conf", CONFIGS[:4], ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items())
)
def test_any_visible_is_exact_for_sub_blocks(conf: dict) -> None:
    """The compute sub-block test (some visible pair by position) against the element mask,
    on random rectangles of every size and offset, traced as the kernels trace it."""
    conf = dict(conf)
    t, s = conf.pop("t"), conf.pop("s")
    cfg = _cfg(t, s, 128, 128, **conf)
    mask = element_mask(cfg, None, None)[0]
    rng = np.random.default_rng()
    for _ in range(300):
        q0, k0 = int(rng.integers(0, t)), int(rng.integers(0, cfg.kv_len_padded))
        q1 = min(q0 + int(rng.integers(1, 200)), t) - 1
        k1 = min(k0 + int(rng.integers(1, 300)), cfg.kv_len_padded) - 1
        got = block_any_visible(jnp.int32(q0), jnp.int32(q1), jnp.int32(k0), jnp.int32(k1), cfg)
        assert bool(got) == bool(mask[q0 : q1 + 1, k0 : k1 + 1].any()), (q0, q1, k0, k1)
