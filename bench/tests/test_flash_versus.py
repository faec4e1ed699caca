"""The splash traffic model and the side-by-side table, without libtpu or a compile."""

from __future__ import annotations

from jax.experimental.pallas.ops.tpu.splash_attention import BlockSizes

from bench._flash_traffic import figures
from bench._flash_versus import Column, _row, traffic_key
from bench._flash_versus_analysis import installed_label, paragraphs
from bench._splash_traffic import forward_figures, forward_mask_info, kv_block_fetches


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
    reply = {
        "model": model,
        "fwd": {"temp_bytes": 2**20, "compile_s": 1.25},
        "fwd_bwd": {"error": "ValueError: refused"},
    }
    row = _row(("v5e", 8192, 4), Column("0.2.0", "zoo", []), reply, timing=False)
    assert row[3:8] == ["0.2.0", "512x1024, 4 h/step", "1.0", "error: ValueError: refused", "288"]
    gone = Column("0.1.1", "zoo", [], reason="no wheel")
    row = _row(("v5e", 8192, 4), gone, None, timing=True)
    assert row[5] == "unavailable: no wheel" and row[7] == "—" and len(row) == 14


def test_versions_map_to_the_traffic_model_of_their_grid() -> None:
    assert traffic_key("0.1.1") == "0.1.x"
    assert traffic_key("0.2.0") == traffic_key("0.3.0") == traffic_key("1.0.0.dev1") == "0.2.0"
    assert traffic_key("installed") == "0.2.0"


def _cell_rows(cell: tuple, temps: dict[str, float], kv: dict[str, float]) -> list[dict]:
    chip, t, g = cell
    return [
        {
            "chip": chip, "seq_len": t, "group": g, "kernel": k,
            "model": {"kv_mib": kv[k], "total_mib": kv[k] + 100, "steps": 10,
                      "blocks": "512x1024", "heads_per_step": g},
            "fwd": {"temp_bytes": int(temps[k] * 2**20), "compile_s": 1.0},
            "fwd_bwd": {"temp_bytes": int(2 * temps[k] * 2**20), "compile_s": 2.0},
        }
        for k in temps
    ]  # fmt: skip


def test_paragraphs_follow_the_recorded_installed_label() -> None:
    kv = {"0.1.1": 1152.0, "0.2.0": 288.0, "9.9.9": 288.0, "splash": 4160.0}
    rows = _cell_rows(("v5e", 8192, 4), {"0.1.1": 33, "0.2.0": 33, "9.9.9": 33, "splash": 1}, kv)
    rows += _cell_rows(
        ("v5e", 32768, 4), {"0.1.1": 444, "0.2.0": 704, "9.9.9": 444.5, "splash": 320}, kv
    )
    result = {"data": {"installed": "9.9.9", "rows": rows, "columns": {}}}
    text = "\n".join(paragraphs(result))
    assert "**9.9.9 against splash (v5e, T=8,192, G=4).**" in text
    assert "**9.9.9 against 0.1.1.**" in text
    assert "**0.2.0 → 9.9.9.**" in text and "0.1.1's figure (within 1%) in 1 of 1" in text
    assert "; 260 MiB less than 0.2.0's" in text  # 704 - 444.5, rounded
    # A result written before the label was recorded: the zoo column that came from no wheel.
    old = {"data": {"rows": [], "columns": {"0.1.1": {"wheel": "wheelhouse/"}, "0.2.0": {"wheel": ""},
                                            "splash": {"wheel": ""}}}}  # fmt: skip
    assert installed_label(old) == "0.2.0"
