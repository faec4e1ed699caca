"""The shared conformance suite with default blocks, and a cut of its cases again with blocks
small enough that each one runs several query and key blocks, padded tails and skipped blocks.

With the CPU default of 256 most suite cases fit in one block; ``test_chunked_blocks.py``
covers further multi-block geometry.
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
from zoo_chunked import ENV_BLOCK_KV, ENV_BLOCK_Q

#: Default-block cases marked ``full``: each repeats, through the same code, what a kept case
#: checks (named beside it; "small" is test_conformance_with_small_blocks, the same case on
#: several blocks). Every case compiles its forward and backward anew.
FULL: dict[str, str] = {
    "plain-bf16": "h128-causal-segments-bf16 (bfloat16), plain-f32 (no mask)",
    "causal-f32": "len200-causal (causal)",
    "causal-bf16": "small all-bf16 (causal, bfloat16)",
    "segments-f32": "all-f32 (shared segment ids)",
    "window-sym-f32": "window-left-right-f32 (a window both sides, not causal)",
    "softcap-f32": "all-f32 (soft cap)",
    "scale-f32": "all-f32 (scale)",
    "causal-segments-f32": "all-f32 (causal with segment ids)",
    "causal-window-bf16": "small all-bf16 (causal window, bfloat16)",
    "causal-window-softcap-bf16": "small all-bf16 (causal window, soft cap, bfloat16)",
    "segments-window-f32": "mla-v96-wider-segments-window (segment ids with a window)",
    "all-bf16": "small all-bf16",
    "gqa1-causal": "small mla-qk192-v128-causal (one query head per key head)",
    "gqa2-causal": "all-f32 (4 query heads over 2)",
    "gqa4-causal-bf16": "small gqa8-mqa-causal, all-f32 (query head groups)",
    "gqa8-mqa-causal": "small gqa8-mqa-causal",
    "h96-causal": "small mla-sinks-all-bf16 (96-wide queries and keys)",
    "h256-window": "small mla-qk192-v128-causal (a wide head), window-left-right-f32",
    "q97-kv33-causal": "small q97-kv33-causal",
    "empty-rows-causal-segments-bf16": "small empty-rows-causal-segments-bf16",
    "empty-rows-window-q48-kv16": "small empty-rows-window-q48-kv16",
    "sinks-f32": "sinks-all-f32",
    "sinks-causal-window-bf16": "small mla-sinks-all-bf16 (sinks, causal window, bfloat16)",
    "sinks-gqa8-mqa-causal": "sinks-all-f32 (sinks), small gqa8-mqa-causal (one key head)",
    "sinks-empty-rows-segments": "small mla-sinks-all-bf16 (sinks with rows that see no key)",
    "mla-qk192-v128-causal": "small mla-qk192-v128-causal",
    "mla-qk192-v128-causal-bf16": "small mla-qk192-v128-causal, small mla-sinks-all-bf16",
    "mla-cross-q33-kv97-segments": "small mla-qk192-v128-causal (narrower values), "
    "cross-q33-kv97-segments (cross attention)",
    "mla-sinks-all-bf16": "small mla-sinks-all-bf16",
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
    implementation = "chunked"


# bfloat16, all features together, the GQA extreme, the largest head, cross shapes and both
# kinds of empty rows (single features in float32 are in test_chunked_blocks.py).
MULTI_BLOCK = (
    "causal-bf16",
    "all-bf16",
    "gqa8-mqa-causal",
    "h256-window",
    "cross-q33-kv97-segments",
    "q97-kv33-causal",
    "empty-rows-causal-segments-bf16",
    "empty-rows-window-q48-kv16",
    "sinks-all-f32",
    "mla-qk192-v128-causal",
    "mla-sinks-all-bf16",
)


@pytest.mark.parametrize("case", [c for c in CASES if c.new_features], ids=str)
def test_it_claims_every_contract_1_3_feature(case: ConformanceCase) -> None:
    """The suite accepts a refusal that names the feature; chunked serves them all."""
    assert refusal("chunked", case) is None


def test_multi_block_selection_names_real_cases() -> None:
    assert set(MULTI_BLOCK) | set(FULL) <= {c.name for c in CASES}
    assert set(FULL_SMALL) <= set(MULTI_BLOCK)


#: Small-block cases marked ``full``, with the kept small-block case that covers each.
FULL_SMALL = {
    "causal-bf16": "all-bf16 (causal in bfloat16, with every feature)",
    "h256-window": "mla-qk192-v128-causal (a wide head over the same blocks), "
    "empty-rows-window-q48-kv16 (a window both sides)",
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.full) if c.name in FULL_SMALL else c
        for c in CASES
        if c.name in MULTI_BLOCK
    ],
    ids=str,
)
def test_conformance_with_small_blocks(
    case: ConformanceCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Unequal sizes so query and key block edges do not line up.
    monkeypatch.setenv(ENV_BLOCK_Q, "32")
    monkeypatch.setenv(ENV_BLOCK_KV, "24")
    failures = run_case("chunked", case)
    assert not failures, "\n".join(failures)
