"""The shared conformance cases against ``splash`` in Pallas interpret mode, forward and
gradients against the float64 reference, fresh random inputs each run.

Splash tiles each sequence in blocks of a multiple of 128, and the suite's table uses lengths
such as 67 and 97 to straddle other kernels' blocks, so each case runs here with its features
(causal, packed segments, windows, soft cap, scale, GQA/MQA, dtype, rows that see no key)
unchanged and its lengths replaced by ones splash serves: 384 and 640 give three and five
blocks of 128, and T != S keeps every case that has it (and, for the window case, rows past the
keys' end that see nothing).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention.testing import CASES, ConformanceCase, refusal, run_case

_BY_NAME = {c.name: c for c in CASES}

# (suite case, q_len, kv_len).
ALIGNED = (
    ("causal-bf16", 256, 256),
    ("segments-f32", 384, 384),
    ("window-left-right-f32", 384, 384),
    ("softcap-f32", 128, 128),
    ("causal-window-softcap-bf16", 256, 256),
    ("all-f32", 384, 384),
    ("all-bf16", 256, 256),
    ("gqa8-mqa-causal", 256, 256),
    ("gqa4-causal-bf16", 128, 128),
    ("h96-causal", 128, 128),
    ("h128-causal-segments-bf16", 256, 256),
    ("h256-window", 128, 128),
    ("cross-q33-kv97-segments", 128, 384),
    ("q97-kv33-causal", 384, 128),
    ("len300-causal-window", 640, 640),
    ("empty-rows-segments", 128, 128),
    ("empty-rows-causal-segments-bf16", 256, 256),
    # Rows 131 and on see no key; the third query block sees none at all, so splash skips
    # every one of its key blocks.
    ("empty-rows-window-q48-kv16", 384, 128),
    # Contract 1.3: splash's own sinks and value head dim.
    ("sinks-all-f32", 384, 384),
    ("sinks-causal-window-bf16", 256, 256),
    ("sinks-gqa8-mqa-causal", 128, 128),
    ("sinks-empty-rows-segments", 128, 128),
    ("mla-qk192-v128-causal", 256, 256),
    ("mla-v96-wider-segments-window", 256, 256),
    ("mla-cross-q33-kv97-segments", 128, 384),
    ("mla-sinks-all-bf16", 256, 256),
)

CASES_HERE = [dataclasses.replace(_BY_NAME[name], q_len=t, kv_len=s) for name, t, s in ALIGNED] + [
    # A window wider than a block on both sides, without causal: every query block visits
    # three or four key blocks, partly masked at both edges.
    ConformanceCase(
        name="window-200-130-five-blocks",
        batch=1,
        q_len=640,
        kv_len=640,
        num_heads=2,
        num_kv_heads=1,
        window=(200, 130),
    ),
]


#: Cases marked ``full``: each repeats, through the same code, what a kept case checks (named
#: beside it); every case compiles the interpret-mode kernels anew.
FULL: dict[str, str] = {
    "causal-bf16": "h128-causal-segments-bf16 (causal, bfloat16)",
    "segments-f32": "all-f32 (shared segment ids)",
    "window-left-right-f32": "window-200-130-five-blocks (a window both sides, not causal)",
    "softcap-f32": "all-f32 (soft cap)",
    "causal-window-softcap-bf16": "mla-sinks-all-bf16 (causal window, soft cap, bfloat16)",
    "all-bf16": "all-f32 (every feature), mla-sinks-all-bf16 (them in bfloat16)",
    "gqa4-causal-bf16": "gqa8-mqa-causal, all-f32 (4 query heads over 2)",
    "h96-causal": "mla-sinks-all-bf16 (96-wide queries and keys)",
    "h256-window": "all-f32, window-200-130-five-blocks (the same kernels at another head dim; "
    "test_splash_compile's wide program compiles 256-wide heads with Mosaic)",
    "q97-kv33-causal": "empty-rows-window-q48-kv16 (more queries than keys), all-f32 (causal)",
    "len300-causal-window": "all-f32 (causal window over three blocks), "
    "window-200-130-five-blocks (five blocks)",
    "empty-rows-segments": "mla-sinks-all-bf16 (unmatched ids)",
    "empty-rows-causal-segments-bf16": "mla-sinks-all-bf16 (unmatched ids, causal, bfloat16)",
    "sinks-causal-window-bf16": "mla-sinks-all-bf16 (sinks, causal window, bfloat16)",
    "sinks-gqa8-mqa-causal": "sinks-all-f32 (sinks), gqa8-mqa-causal (one key head)",
    "sinks-empty-rows-segments": "mla-sinks-all-bf16 (sinks with rows that see no key)",
    "mla-qk192-v128-causal": "mla-sinks-all-bf16 (values narrower than the queries)",
    "mla-cross-q33-kv97-segments": "cross-q33-kv97-segments (cross attention), "
    "mla-sinks-all-bf16 (narrower values)",
}


def test_the_full_cases_name_real_ones() -> None:
    assert set(FULL) <= {c.name for c in CASES_HERE}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.full) if c.name in FULL else c for c in CASES_HERE],
    ids=str,
)
def test_matches_float64_reference(case: ConformanceCase) -> None:
    failures = run_case("splash", case)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("case", [c for c in CASES if c.new_features], ids=str)
def test_it_claims_every_contract_1_3_feature(case: ConformanceCase) -> None:
    """The suite accepts a refusal that names the feature; JAX's splash has sinks and a value
    head dim of its own, so splash serves them."""
    assert refusal("splash", case) is None


def test_named_scope_in_hlo() -> None:
    """The contract's scope (``zoo_attention.splash-VERSION``, what ``zoo profile`` reads) is
    in the lowered HLO; the suite's own check uses a length of 16, which splash refuses."""
    q = jnp.asarray(np.random.default_rng().standard_normal((1, 128, 2, 64)), jnp.float32)
    fn = jax.jit(lambda q: zoo_attention.dot_product_attention(q, q, q, implementation="splash"))
    text = fn.lower(q).as_text(debug_info=True)
    assert zoo_attention.scope_name("splash", zoo_attention.get_kernel("splash").version) in text
