"""The conformance case table: every contract feature, their combinations, and awkward shapes.

Shapes are small on purpose: interpret-mode kernels run them on a CPU. Lengths are odd or
straddle 128 so kernels with blocks of 128 (or smaller test blocks) exercise padded tails and
several blocks per axis.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

Segments = Literal["shared", "separate", "unmatched"] | None


@dataclasses.dataclass(frozen=True)
class ConformanceCase:
    """One attention call to check: shapes, dtype and features.

    ``segments``: ``"shared"`` one id array for queries and keys; ``"separate"`` a (q, kv) pair
    (required when T != S); ``"unmatched"`` a pair where some query ids appear in no key, so
    those rows see nothing. Contract 1.3: ``sinks`` draws one sink logit per query head;
    ``value_head_dim`` gives the values a head dim of their own (``None``: ``head_dim``).
    """

    name: str
    batch: int = 2
    q_len: int = 67
    kv_len: int = 67
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 64
    dtype: str = "float32"
    is_causal: bool = False
    segments: Segments = None
    window: int | tuple[int, int] | None = None
    soft_cap: float | None = None
    scale: float | None = None
    expect_empty_rows: bool = False
    sinks: bool = False
    value_head_dim: int | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def new_features(self) -> tuple[str, ...]:
        """The contract 1.3 features the case uses (``AttentionSpec.features`` names): a
        kernel that does not claim one refuses the case, and the suite checks the refusal."""
        used: tuple[str, ...] = ("sinks",) if self.sinks else ()
        if self.value_head_dim is not None and self.value_head_dim != self.head_dim:
            used += ("value_head_dim",)
        return used


def _c(name: str, **kw: object) -> ConformanceCase:
    return ConformanceCase(name=name, **kw)  # type: ignore[arg-type]


CASES: tuple[ConformanceCase, ...] = (
    # One feature at a time, both dtypes.
    _c("plain-f32"),
    _c("plain-bf16", dtype="bfloat16"),
    _c("causal-f32", is_causal=True),
    _c("causal-bf16", is_causal=True, dtype="bfloat16"),
    _c("segments-f32", segments="shared"),
    _c("window-sym-f32", window=8),
    _c("window-left-right-f32", window=(4, 9)),
    _c("softcap-f32", soft_cap=5.0),
    _c("scale-f32", scale=0.3),
    # Combinations.
    _c("causal-segments-f32", is_causal=True, segments="shared"),
    _c("causal-window-bf16", is_causal=True, window=(16, 0), dtype="bfloat16"),
    _c(
        "causal-window-softcap-bf16", is_causal=True, window=(12, 0), soft_cap=3.0, dtype="bfloat16"
    ),
    _c("segments-window-f32", segments="shared", window=(5, 5)),
    _c("all-f32", is_causal=True, segments="shared", window=(20, 3), soft_cap=4.0, scale=0.2),
    _c(
        "all-bf16",
        is_causal=True,
        segments="shared",
        window=(20, 3),
        soft_cap=4.0,
        scale=0.2,
        dtype="bfloat16",
    ),
    # Grouped-query ratios 1, 2, 4, 8 (MHA … MQA).
    _c("gqa1-causal", num_heads=8, num_kv_heads=8, is_causal=True, batch=1),
    _c("gqa2-causal", num_heads=8, num_kv_heads=4, is_causal=True, batch=1),
    _c("gqa4-causal-bf16", num_heads=8, num_kv_heads=2, is_causal=True, batch=1, dtype="bfloat16"),
    _c("gqa8-mqa-causal", num_heads=8, num_kv_heads=1, is_causal=True, batch=1),
    # Head dims (64 is the default above).
    _c("h96-causal", head_dim=96, is_causal=True),
    _c(
        "h128-causal-segments-bf16",
        head_dim=128,
        is_causal=True,
        segments="shared",
        dtype="bfloat16",
    ),
    _c("h256-window", head_dim=256, window=(6, 2), batch=1),
    # Lengths: single token, cross attention T != S, more than one 128-block.
    _c("len1", q_len=1, kv_len=1),
    _c("cross-q33-kv97-segments", q_len=33, kv_len=97, segments="separate"),
    _c("q97-kv33-causal", q_len=97, kv_len=33, is_causal=True),
    _c("len200-causal", q_len=200, kv_len=200, is_causal=True, num_heads=2, num_kv_heads=1),
    _c(
        "len300-causal-window",
        q_len=300,
        kv_len=300,
        is_causal=True,
        window=(64, 0),
        num_heads=2,
        num_kv_heads=1,
        batch=1,
    ),
    # Rows that see no key: zeros out, finite gradients.
    _c("empty-rows-segments", segments="unmatched", expect_empty_rows=True),
    _c(
        "empty-rows-causal-segments-bf16",
        segments="unmatched",
        is_causal=True,
        dtype="bfloat16",
        expect_empty_rows=True,
    ),
    _c("empty-rows-window-q48-kv16", q_len=48, kv_len=16, window=(2, 2), expect_empty_rows=True),
    # Contract 1.3: attention sinks (gpt-oss), alone and with every other feature.
    _c("sinks-f32", sinks=True),
    _c("sinks-causal-window-bf16", sinks=True, is_causal=True, window=(16, 0), dtype="bfloat16"),
    _c(
        "sinks-all-f32",
        sinks=True,
        is_causal=True,
        segments="shared",
        window=(20, 3),
        soft_cap=4.0,
        scale=0.2,
    ),
    _c("sinks-gqa8-mqa-causal", sinks=True, num_heads=8, num_kv_heads=1, is_causal=True, batch=1),
    _c("sinks-empty-rows-segments", sinks=True, segments="unmatched", expect_empty_rows=True),
    # Contract 1.3: values with a head dim of their own (DeepSeek's multi-head latent attention:
    # 192 for queries and keys, 128 for values), narrower and wider than the queries'.
    _c("mla-qk192-v128-causal", head_dim=192, value_head_dim=128, num_kv_heads=4, is_causal=True),
    _c(
        "mla-qk192-v128-causal-bf16",
        head_dim=192,
        value_head_dim=128,
        num_kv_heads=4,
        is_causal=True,
        dtype="bfloat16",
        batch=1,
    ),
    _c(
        "mla-v96-wider-segments-window",
        head_dim=64,
        value_head_dim=96,
        segments="shared",
        window=(10, 0),
        soft_cap=5.0,
    ),
    _c("mla-cross-q33-kv97-segments", q_len=33, kv_len=97, value_head_dim=32, segments="separate"),
    _c(
        "mla-sinks-all-bf16",
        head_dim=96,
        value_head_dim=64,
        sinks=True,
        is_causal=True,
        segments="unmatched",
        window=(20, 0),
        soft_cap=4.0,
        dtype="bfloat16",
        expect_empty_rows=True,
    ),
)


#: Tolerances per dtype: max |kernel - reference| <= tol * max(1, max |reference|).
TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"out": 2e-5, "grad": 1e-4},
    "bfloat16": {"out": 2e-2, "grad": 4e-2},
}
