"""The modelled flash_tpu traffic table: grouping divides key/value bytes, MHA is unchanged."""

from flash_traffic import figures


def test_gqa_groups_divide_kv_traffic_and_mha_is_unchanged() -> None:
    mha = figures("TPU v5 lite", 8192, 1)
    assert mha["0.1.x"] == mha["0.2.0"]
    gqa = figures("TPU v5 lite", 8192, 4)
    assert gqa["0.2.0"]["heads_per_step"] == 4
    assert gqa["0.1.x"]["kv_mib"] == 4 * gqa["0.2.0"]["kv_mib"]
    # B=2, 16 query heads, 16 query blocks of 512 over 8 key blocks of 1024, causal: 72 visited
    # pairs per head, each a k and a v block of 1024 x 128 bfloat16 (0.5 MiB together).
    assert gqa["0.1.x"]["kv_mib"] == 2 * 16 * 72 * 0.5
    assert gqa["0.2.0"]["steps"] * 4 == gqa["0.1.x"]["steps"]
