"""The shared contract suite, run against flash_tpu in TPU interpret mode (NaN-poisoned memory).

Plus grouped-query ratios 1, 2, 4 and 8 with segment ids and a local window together: the
forward and dQ kernels take a whole group of query heads per grid step, and the mask of a
step is built once for all of them.
"""

import pytest

import zoo_attention
from zoo_attention.testing import (
    CASES,
    ConformanceCase,
    bad_inputs,
    conformance_suite,
    named_scope_failures,
    refusal,
    run_case,
)

#: Cases marked ``full``: each repeats, through the same kernel code, what a kept case checks
#: (named beside it). ``make test`` keeps one case of every feature, dtype, head dim, group and
#: length path; every case compiles the interpret-mode kernels anew (about 4 CPU seconds).
FULL: dict[str, str] = {
    "plain-f32": "len300-causal-window (blocks below the diagonal run unmasked), len1",
    "window-left-right-f32": "empty-rows-window-q48-kv16 (a window both sides, not causal)",
    "q97-kv33-causal": "empty-rows-window-q48-kv16 (more queries than keys), gqa8-mqa-causal",
    "plain-bf16": "h128-causal-segments-bf16 (bfloat16), len1 (no mask)",
    "causal-f32": "len300-causal-window, gqa8-mqa-causal (causal)",
    "causal-bf16": "h128-causal-segments-bf16 (causal, bfloat16)",
    "segments-f32": "all-f32 (shared segment ids)",
    "window-sym-f32": "empty-rows-window-q48-kv16 (a window both sides, not causal)",
    "softcap-f32": "all-f32 (soft cap)",
    "scale-f32": "all-f32 (scale)",
    "causal-segments-f32": "all-f32 (causal with segment ids)",
    "causal-window-bf16": "mla-sinks-all-bf16 (causal window, bfloat16)",
    "causal-window-softcap-bf16": "mla-sinks-all-bf16 (causal window, soft cap, bfloat16)",
    "segments-window-f32": "mla-v96-wider-segments-window (segment ids with a window)",
    "all-bf16": "all-f32 (every feature), mla-sinks-all-bf16 (them in bfloat16)",
    "gqa1-causal": "mla-qk192-v128-causal (one query head per key head)",
    "gqa2-causal": "all-f32 (4 query heads over 2)",
    "gqa4-causal-bf16": "test_gqa_groups_with_segments_and_window[4]",
    "h96-causal": "mla-sinks-all-bf16 (96-wide queries and keys)",
    "h256-window": "test_gemma3_head_dim_256_with_a_window_over_several_blocks",
    "len200-causal": "len300-causal-window (several 128-blocks, causal)",
    "empty-rows-segments": "empty-rows-causal-segments-bf16 (unmatched ids)",
    "sinks-f32": "sinks-all-f32",
    "sinks-causal-window-bf16": "mla-sinks-all-bf16 (sinks, causal window, bfloat16)",
    "sinks-gqa8-mqa-causal": "sinks-all-f32 (sinks), gqa8-mqa-causal (one key head)",
    "sinks-empty-rows-segments": "mla-sinks-all-bf16 (sinks with rows that see no key)",
    "mla-qk192-v128-causal-bf16": "mla-qk192-v128-causal, mla-sinks-all-bf16 (bfloat16)",
    "mla-cross-q33-kv97-segments": "mla-qk192-v128-causal (narrower values), "
    "cross-q33-kv97-segments (cross attention)",
}

Suite = conformance_suite(
    "The shared contract suite; the cases in FULL are marked full.",
    [pytest.param(c, marks=pytest.mark.full) if c.name in FULL else c for c in CASES],
    run_case,
    named_scope_failures,
    bad_inputs(),
    zoo_attention.dot_product_attention,
)


class TestConformance(Suite):
    implementation = "flash_tpu"


def test_the_full_cases_name_real_ones() -> None:
    assert set(FULL) <= {c.name for c in CASES}


@pytest.mark.parametrize("case", [c for c in CASES if c.new_features], ids=str)
def test_it_claims_every_contract_1_3_feature(case: ConformanceCase) -> None:
    """The suite accepts a refusal that names the feature; flash_tpu serves sinks and values
    with a head dim of their own."""
    assert refusal("flash_tpu", case) is None


# The mask of a step built once for a whole group runs for any group: group 4 is kept.
@pytest.mark.parametrize(
    "group", [pytest.param(g, marks=pytest.mark.full) for g in (1, 2, 8)] + [4]
)
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
