"""The shared conformance suite with default blocks, and a cut of its cases again with blocks
small enough that each one runs several query and key blocks, padded tails and skipped blocks.

With the CPU default of 256 most suite cases fit in one block; ``test_chunked_blocks.py``
covers further multi-block geometry.
"""

import pytest

from zoo_attention.testing import CASES, ConformanceCase, ConformanceSuite, refusal, run_case
from zoo_chunked import ENV_BLOCK_KV, ENV_BLOCK_Q


class TestConformance(ConformanceSuite):
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
    assert set(MULTI_BLOCK) <= {c.name for c in CASES}


@pytest.mark.parametrize("case", [c for c in CASES if c.name in MULTI_BLOCK], ids=str)
def test_conformance_with_small_blocks(
    case: ConformanceCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Unequal sizes so query and key block edges do not line up.
    monkeypatch.setenv(ENV_BLOCK_Q, "32")
    monkeypatch.setenv(ENV_BLOCK_KV, "24")
    failures = run_case("chunked", case)
    assert not failures, "\n".join(failures)
