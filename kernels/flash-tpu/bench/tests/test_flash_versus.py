"""The splash traffic model and the side-by-side table, without libtpu or a compile."""

from __future__ import annotations

import pytest
from jax.experimental.pallas.ops.tpu.splash_attention import BlockSizes

from flash_traffic import figures
from flash_versus import _row, heads_per_step, zoo_model
from splash_traffic import forward_figures, forward_mask_info, kv_block_fetches


def test_splash_default_blocks_fetch_kv_once_per_query_head_and_working_step() -> None:
    f = forward_figures(8192, 16, 4)
    # 64 query blocks of 128 over 64 key blocks of 128, causal: 64·65/2 = 2,080 working steps
    # per query head; B=2, N=16; each a k and a v block of 128 x 128 bfloat16 (64 KiB).
    assert f["blocks"] == "128x128"
    assert f["steps"] == 2 * 16 * 2080
    assert f["kv_mib"] == f["steps"] * 64 / 1024
    # The grid does not share a key/value block between the query heads of a group.
    assert forward_figures(8192, 16, 1)["kv_mib"] == forward_figures(8192, 16, 8)["kv_mib"]


def test_replayed_index_maps_fetch_one_block_fewer_per_head_than_the_rule() -> None:
    info = forward_mask_info(8192, 16, BlockSizes.get_default())
    steps = forward_figures(8192, 16, 4)["steps"]
    # Rows 0 and 1 both start at key block 0: one re-use per (sequence, head).
    assert kv_block_fetches(info, num_heads=16, group=4, batch=2) == steps - 2 * 16


def test_splash_with_zoo_blocks_moves_what_zoo_0_1_moves() -> None:
    # One query head per grid step in both: at zoo's v5e blocks they fetch alike.
    zoo = figures("TPU v5 lite", 8192, 4)["0.1.x"]
    splash = forward_figures(8192, 16, 4, blocks=BlockSizes(block_q=512, block_kv=1024))
    assert splash["kv_mib"] == zoo["kv_mib"] == 1152
    assert splash["steps"] == zoo["steps"]


def test_rows_show_errors_and_unavailable_columns_in_their_cells() -> None:
    model = {"blocks": "512x1024", "heads_per_step": 4, "kv_mib": 288.0, "total_mib": 417.0,
             "steps": 576}  # fmt: skip
    cell = {"chip": "v5e", "seq_len": 8192, "group": 4}
    row = _row({**cell, "kernel": "0.2.0", "model": model, "unavailable": None,
                "fwd": {"temp_bytes": 2**20, "compile_s": 1.25},
                "fwd_bwd": {"error": "ValueError: refused"}}, timing=False)  # fmt: skip
    assert row[3:8] == ["0.2.0", "512x1024, 4 h/step", "1.0", "error: ValueError: refused", "288"]
    gone = {**cell, "kernel": "0.1.1", "model": {}, "fwd": None, "fwd_bwd": None,
            "unavailable": "no wheel"}  # fmt: skip
    row = _row(gone, timing=True)
    assert row[5] == "unavailable: no wheel" and row[7] == "—" and len(row) == 14


@pytest.mark.parametrize(("version", "grouped"), [("0.1.1", False), ("0.2.0", True),
                                                  ("0.3.0", True), ("installed", True)])  # fmt: skip
def test_each_version_is_modelled_on_its_own_grid(version: str, grouped: bool) -> None:
    heads = heads_per_step(version, 4)
    assert heads == (4 if grouped else 1)
    plan = {"device_kind": "TPU v5 lite", "blocks": [512, 1024, 512, 512], "kv_compute": None}
    model = zoo_model(plan, 8192, 4, heads)
    # The flash_traffic table's figures of the same grid (0.1.x: one query head per step).
    reference = figures("TPU v5 lite", 8192, 4)["0.2.0" if grouped else "0.1.x"]
    assert {k: model[k] for k in ("kv_mib", "total_mib", "steps", "blocks")} == {
        k: reference[k] for k in ("kv_mib", "total_mib", "steps", "blocks")
    }
