"""The forward/dQ grid's index maps against a plain NumPy model of which blocks are visited.

The real index maps of ``_calls`` are evaluated at every grid point, in Pallas's iteration
order (last axis fastest). A block is fetched from HBM when its block index differs from the
previous grid step's; the model says which key blocks each query block needs (any visible
pair, from a brute-force element mask) and which key/value head each query head reads
(``n // G``). GQA grouping must fetch each key/value block once per ``P`` query heads.
"""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from flash_helpers import element_mask

from zoo_flash_tpu._calls import _query_major
from zoo_flash_tpu._config import FlashConfig
from zoo_flash_tpu._cost import kv_visit_bytes
from zoo_flash_tpu._policy import BlockSizes, heads_per_step


def _cfg(n: int, k: int, heads: int, **kw) -> FlashConfig:  # type: ignore[no-untyped-def]
    return FlashConfig(
        batch=2, q_len=kw.pop("t", 700), kv_len=kw.pop("s", 700), num_heads=n, num_kv_heads=k,
        head_dim=64, dtype="bfloat16", scale=1.0, causal=kw.pop("causal", False),
        window=kw.pop("window", None), soft_cap=None, has_segments=kw.pop("segments", False),
        blocks=BlockSizes(128, 128, 128, 128), vmem_limit_bytes=0, heads_per_step=heads,
    )  # fmt: skip


def _needed_kv_blocks(cfg: FlashConfig, ids: np.ndarray | None) -> list[list[set[int]]]:
    """Per batch row and query block: the key blocks holding a visible pair (NumPy, by element)."""
    bq, bk = cfg.blocks.block_q, cfg.blocks.block_kv
    mask = element_mask(cfg, ids, ids)
    out = []
    for b in range(cfg.batch):
        mb = mask[b]
        blocks = mb.reshape(cfg.q_len_padded // bq, bq, cfg.kv_len_padded // bk, bk).any((1, 3))
        out.append([set(np.flatnonzero(row).tolist()) for row in blocks])
    return out


def _walk(cfg: FlashConfig, ids: np.ndarray | None) -> tuple[dict, int, int]:
    """Evaluate the maps over the whole grid.

    Returns ``{(b, query head, q block): set of (kv head, kv block) seen}``, the number of key
    block fetches (index changes along the grid order) and of query-block fetches.
    """
    bq, bk = cfg.blocks.block_q, cfg.blocks.block_kv
    segment_ids = None
    if ids is not None:
        segment_ids = (jnp.asarray(ids[:, : cfg.q_len]), jnp.asarray(ids[:, : cfg.kv_len]))
    ops, ranges, maps = _query_major(cfg, bq, bk, segment_ids)
    pre = [np.asarray(a) for _, a in ops.prefetch]
    seen: dict = {}
    kv_fetches = q_fetches = 0
    last_kv = last_q = None
    grid = (cfg.batch, cfg.head_steps, cfg.q_len_padded // bq, ranges.steps)
    for b, c, i, j in itertools.product(*map(range, grid)):
        q_idx = tuple(int(x) for x in maps["q"](b, c, i, j, *pre))
        kv_idx = tuple(int(x) for x in maps["kv"](b, c, i, j, *pre))
        q_fetches += q_idx != last_q
        kv_fetches += kv_idx != last_kv
        last_q, last_kv = q_idx, kv_idx
        assert q_idx == (b, i, c)  # column block c of width P·Hp: heads c·P .. c·P + P - 1
        lo, hi = pre[0][b * grid[2] + i], pre[1][b * grid[2] + i]
        if lo + j <= hi:  # a step the kernel computes (later steps re-use the block in VMEM)
            for n in range(c * cfg.heads_per_step, (c + 1) * cfg.heads_per_step):
                seen.setdefault((b, n, i), set()).add((kv_idx[2], kv_idx[1]))
    return seen, kv_fetches, q_fetches


CASES = [
    {"n": 4, "k": 4, "causal": True},
    {"n": 8, "k": 2, "causal": True, "window": (200, 0)},
    {"n": 8, "k": 1, "window": (100, 60)},
    {"n": 16, "k": 1, "causal": True},  # G=16: two steps of 8 heads per group
    {"n": 4, "k": 2, "causal": True, "segments": True, "t": 520, "s": 520},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_grouped_maps_visit_exactly_the_needed_blocks_of_each_heads_kv_head(case: dict) -> None:
    case = dict(case)
    n, k = case.pop("n"), case.pop("k")
    heads = heads_per_step(n // k)
    assert heads == min(n // k, 8)
    cfg = _cfg(n, k, heads, **case)
    ids = None
    if cfg.has_segments:
        rng = np.random.default_rng()
        cuts = np.sort(rng.integers(1, cfg.q_len, size=(cfg.batch, 3)), axis=1)
        ids = (np.arange(cfg.q_len_padded)[None, None, :] >= cuts[:, :, None]).sum(1)
        ids[:, cfg.q_len :] = ids[:, cfg.q_len - 1 : cfg.q_len]  # padding repeats the last id
    needed = _needed_kv_blocks(cfg, ids)
    seen, kv_fetches, q_fetches = _walk(cfg, ids)
    group = n // k
    for b, head, i in itertools.product(
        range(cfg.batch), range(n), range(cfg.q_len_padded // cfg.blocks.block_q)
    ):
        got = seen.get((b, head, i), set())
        assert {h for h, _ in got} <= {head // group}, (b, head, i, got)
        want = needed[b][i]
        blocks = {blk for _, blk in got}
        if cfg.has_segments:
            # Segment ids narrow the range from per-block min/max ids: a superset, never less.
            assert want <= blocks, (b, head, i)
        else:
            assert blocks == want, (b, head, i, blocks, want)
    # Each query block once per head step; key/value blocks at most once per visit of P heads.
    assert q_fetches == cfg.batch * cfg.head_steps * (cfg.q_len_padded // cfg.blocks.block_q)
    block_bytes = 2 * cfg.blocks.block_kv * cfg.head_dim_padded * cfg.itemsize
    assert kv_fetches * block_bytes <= kv_visit_bytes(cfg, 128, 128) or cfg.has_segments


def test_grouping_divides_key_value_fetches_by_the_heads_per_step() -> None:
    per_head = _walk(_cfg(8, 2, 1, causal=True), None)[1]
    grouped = _walk(_cfg(8, 2, 4, causal=True), None)[1]
    assert per_head == 4 * grouped
    modelled = [kv_visit_bytes(_cfg(8, 2, p, causal=True), 128, 128) for p in (1, 4)]
    assert modelled[0] == 4 * modelled[1]


def test_heads_per_step_divides_the_group() -> None:
    assert [heads_per_step(g) for g in (1, 2, 3, 4, 6, 8, 12, 16, 32)] == [
        1, 2, 3, 4, 6, 8, 6, 8, 8,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="must divide the group size"):
        _cfg(8, 2, 3)


def _interleaved_ids(cfg: FlashConfig, rng: np.random.Generator) -> np.ndarray:
    """``[B, Tp]`` ids that are not sorted: each 128-token run belongs to one of three
    interleaved sequences, so a query block's visited range holds blocks it shares nothing with."""
    runs = rng.integers(0, 3, size=(cfg.batch, cfg.q_len_padded // 128))
    return np.repeat(runs, 128, axis=1)


@pytest.mark.parametrize(
    "case", [{"causal": True}, {"window": (300, 100)}], ids=["causal", "window"]
)
def test_blocks_sharing_no_segment_are_never_loaded(case: dict) -> None:
    """Inside a visited range, a key block whose ids share nothing with the query block is
    not fetched: per row, the number of key-block loads equals the number of blocks computed,
    and every computing step loads its own block."""
    cfg = _cfg(4, 2, 2, segments=True, t=1400, s=1400, **case)
    rng = np.random.default_rng()
    ids = _interleaved_ids(cfg, rng)
    bq = bk = 128
    segment_ids = (jnp.asarray(ids[:, : cfg.q_len]), jnp.asarray(ids[:, : cfg.kv_len]))
    ops, ranges, maps = _query_major(cfg, bq, bk, segment_ids)
    assert ranges.fetch is not None
    pre = [np.asarray(a) for _, a in ops.prefetch]
    nq = cfg.q_len_padded // bq
    padded = np.concatenate([ids[:, : cfg.q_len], np.repeat(ids[:, cfg.q_len - 1 :][:, :1],
                             cfg.q_len_padded - cfg.q_len, axis=1)], axis=1)  # fmt: skip
    blocks = padded.reshape(cfg.batch, nq, bq)
    lo_mask, hi_mask = blocks.min(-1), blocks.max(-1)
    needed = _needed_kv_blocks(cfg, padded)
    skipped_inside = 0
    for b, c, i in itertools.product(range(cfg.batch), range(cfg.head_steps), range(nq)):
        lo, hi = pre[0][b * nq + i], pre[1][b * nq + i]
        loads, computed, last = 0, 0, None
        for j in range(ranges.steps):
            kv_idx = tuple(int(x) for x in maps["kv"](b, c, i, j, *pre))
            loads += kv_idx != last
            last = kv_idx
            jb = lo + j
            # The kernel's own test of a step: inside the range, and the id ranges overlap.
            computes = jb <= hi and (
                lo_mask[b, i] <= hi_mask[b, jb] and lo_mask[b, jb] <= hi_mask[b, i]
            )
            if computes:
                computed += 1
                assert kv_idx[1] == jb
            elif jb <= hi:
                skipped_inside += 1
        assert needed[b][i] <= {
            lo + j for j in range(ranges.steps) if lo + j <= hi
        }  # nothing needed is cut
        assert loads == max(computed, 1), (b, c, i, loads, computed)
    assert skipped_inside > 0  # the ids did put non-sharing blocks inside ranges
