"""The linear-attention conformance cases: lengths that are not multiples of the chunk, packed
documents (one starting exactly at a chunk edge), initial states, grouped heads, unequal key
and value widths, float32 and bfloat16.

Shapes are small (an interpret-mode kernel runs them on a CPU). The inputs are drawn afresh
each run, by rules every draw keeps: decays in ``(-inf, 0)``, write strengths in ``(0, 1)``
and, without the L2 normalisation, keys short enough that the recurrence stays bounded.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

Segments = Literal["none", "random", "chunk_edge"]


@dataclasses.dataclass(frozen=True)
class LinearCase:
    """One gated-delta-rule call to check: ``query, key [batch, seq_len, num_qk_heads,
    key_dim]``, ``value [batch, seq_len, num_heads, value_dim]``.

    ``segments``: ``"none"``; ``"random"`` two to four documents per row; ``"chunk_edge"`` a
    document starting at token 64 (the chunk edge of the chunked kernels) and another inside a
    chunk. ``initial_state``: a random state goes in. ``dtype`` is that of query, key, value
    and beta; the log decay is float32, as models compute it.
    """

    name: str
    batch: int = 2
    seq_len: int = 100
    num_heads: int = 4
    num_qk_heads: int = 2
    key_dim: int = 32
    value_dim: int = 32
    dtype: str = "float32"
    normalize_qk: bool = True
    scale: float | None = None
    segments: Segments = "none"
    initial_state: bool = False

    def __str__(self) -> str:
        return self.name


def draw_segment_ids(case: LinearCase, rng: np.random.Generator) -> np.ndarray | None:
    """int32 ``[batch, seq_len]`` document ids by the case's rule, or ``None``."""
    b, t = case.batch, case.seq_len
    if case.segments == "none":
        return None
    rows = []
    for _ in range(b):
        if case.segments == "chunk_edge":
            cuts = np.asarray([64, int(rng.integers(65, t))]) if t > 65 else np.asarray([t // 2])
        else:
            cuts = np.sort(rng.choice(np.arange(1, t), size=int(rng.integers(1, 4)), replace=False))
        rows.append(np.searchsorted(cuts, np.arange(t), side="right"))
    return np.stack(rows).astype(np.int32)


#: The cases every linear-attention kernel must pass.
CASES: tuple[LinearCase, ...] = (
    LinearCase("f32-t100-grouped-l2"),
    LinearCase(
        "f32-t64-one-chunk-no-l2", seq_len=64, num_qk_heads=4, normalize_qk=False, scale=0.3
    ),
    LinearCase("f32-t1-decode-step", seq_len=1, initial_state=True),
    LinearCase("f32-t150-packed-initial-state", seq_len=150, segments="random", initial_state=True),
    LinearCase("f32-t130-document-at-chunk-edge", batch=1, seq_len=130, segments="chunk_edge"),
    LinearCase(
        "f32-t37-dk48-dv24-one-qk-head", seq_len=37, num_qk_heads=1, key_dim=48, value_dim=24
    ),
    LinearCase(
        "f32-t70-dim128",
        batch=1,
        seq_len=70,
        num_heads=2,
        num_qk_heads=1,
        key_dim=128,
        value_dim=128,
        initial_state=True,
    ),
    LinearCase("bf16-t130-packed-grouped", seq_len=130, segments="random", dtype="bfloat16"),
    LinearCase(
        "bf16-t90-initial-state-no-l2",
        seq_len=90,
        normalize_qk=False,
        initial_state=True,
        dtype="bfloat16",
    ),
)

#: Tolerances per dtype: max |kernel - reference| <= tol * max(1, max |reference|). Measured:
#: the chunked and recurrent kernels within 1.5e-6 in float32 and 3e-3 in bfloat16 (its
#: rounding of the output and the gradients), over every case and three seeds.
TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"out": 2e-5, "grad": 5e-5},
    "bfloat16": {"out": 1.5e-2, "grad": 2e-2},
}
