"""Cost estimates: FLOPs of exactly the visited blocks, bytes that grow with the visits."""

from __future__ import annotations

import pytest

from zoo_flash_tpu._config import FlashConfig
from zoo_flash_tpu._cost import dkdv_cost, dq_cost, forward_cost
from zoo_flash_tpu._policy import BlockSizes


def _cfg(**kw: object) -> FlashConfig:
    base = {
        "batch": 2, "q_len": 1000, "kv_len": 1000, "num_heads": 8, "num_kv_heads": 2,
        "head_dim": 96, "dtype": "bfloat16", "scale": 0.1, "causal": False, "window": None,
        "soft_cap": None, "has_segments": False, "blocks": BlockSizes(128, 256, 256, 128),
        "vmem_limit_bytes": 0,
    }  # fmt: skip
    return FlashConfig(**{**base, **kw})  # type: ignore[arg-type]


def test_dense_flops_are_the_padded_matmuls() -> None:
    cfg = _cfg()
    tp, sp, hp = cfg.q_len_padded, cfg.kv_len_padded, cfg.head_dim_padded
    assert (tp, sp, hp) == (1024, 1024, 128)
    dense = cfg.batch * cfg.num_heads * tp * sp * hp
    assert forward_cost(cfg).flops == 4 * dense
    assert dq_cost(cfg).flops == 6 * dense
    assert dkdv_cost(cfg).flops == 8 * dense
    assert forward_cost(cfg).transcendentals == dense // hp
    assert forward_cost(_cfg(soft_cap=5.0)).transcendentals == 2 * dense // hp


def test_skipped_blocks_cost_nothing() -> None:
    dense = forward_cost(_cfg())
    causal = forward_cost(_cfg(causal=True))
    # 8 query blocks of 128 over 4 key blocks of 256: rows visit 1,1,2,2,3,3,4,4 of 4 blocks.
    assert causal.flops == dense.flops * 20 // 32
    window = forward_cost(_cfg(window=(100, 0)))
    assert window.flops < causal.flops
    assert window.bytes_accessed < causal.bytes_accessed < dense.bytes_accessed


@pytest.mark.parametrize("cost", [forward_cost, dq_cost, dkdv_cost])
def test_costs_are_positive_integers(cost) -> None:  # type: ignore[no-untyped-def]
    c = cost(_cfg(causal=True, window=(300, 20)))
    assert min(c.flops, c.transcendentals, c.bytes_accessed) > 0
