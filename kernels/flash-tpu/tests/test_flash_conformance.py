"""The shared contract suite, run against flash_tpu in TPU interpret mode (NaN-poisoned memory).

Plus grouped-query ratios 1, 2, 4 and 8 with segment ids and a local window together: the
forward and dQ kernels take a whole group of query heads per grid step, and the mask of a
step is built once for all of them.
"""

import pytest

from zoo_attention.testing import CASES, ConformanceCase, ConformanceSuite, refusal, run_case


class TestConformance(ConformanceSuite):
    implementation = "flash_tpu"


@pytest.mark.parametrize("case", [c for c in CASES if c.new_features], ids=str)
def test_it_claims_every_contract_1_3_feature(case: ConformanceCase) -> None:
    """The suite accepts a refusal that names the feature; flash_tpu serves sinks and values
    with a head dim of their own."""
    assert refusal("flash_tpu", case) is None


@pytest.mark.parametrize("group", [1, 2, 4, 8])
def test_gqa_groups_with_segments_and_window(group: int) -> None:
    case = ConformanceCase(
        name=f"gqa{group}-causal-segments-window",
        batch=1,
        q_len=160,
        kv_len=160,
        num_heads=8,
        num_kv_heads=8 // group,
        is_causal=True,
        segments="shared",
        window=(60, 0),
    )
    failures = run_case("flash_tpu", case)
    assert not failures, "\n".join(failures)


def test_gemma3_head_dim_256_with_a_window_over_several_blocks() -> None:
    """Gemma 3's 256-wide heads (two lane tiles), a group of 4 (gemma-3-1b's) and a sliding
    window that spans several 128-key blocks (interpret mode's blocks; the models' windows are
    512 and 1024 on 512 x 1024 blocks): forward and gradients against the reference."""
    case = ConformanceCase(
        name="h256-g4-window255",
        batch=1,
        q_len=512,
        kv_len=512,
        num_heads=4,
        num_kv_heads=1,
        head_dim=256,
        is_causal=True,
        window=(255, 0),
    )
    failures = run_case("flash_tpu", case)
    assert not failures, "\n".join(failures)
