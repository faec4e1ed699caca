"""The fused linear cross-entropy conformance cases: vocabularies of real models and sizes no
tile divides, masked tokens, z-loss, soft cap, float32 and bfloat16, both head layouts.

Shapes are small (interpret-mode kernels run them on a CPU) and odd, so a kernel's token and
vocabulary tiles end part-way. The inputs are drawn afresh each run.
"""

from __future__ import annotations

import dataclasses

from .._spec import HeadLayout


@dataclasses.dataclass(frozen=True)
class CrossEntropyCase:
    """One call to check: ``hidden [*tokens, dim]``, a head of ``vocab`` columns laid out
    ``head_layout``.

    ``masked``: a random loss mask with at least one token that counts and one that does not
    (whose targets are -100, which a kernel must never read). ``temperature`` divides the
    logits after the soft cap. ``z_loss``: ``log_z`` gets a
    cotangent too (else only ``ce``). ``logit_std``: the logits' standard deviation (large
    with a soft cap, so the cap bites). ``head_dtype``: the head's dtype when it differs from
    the hidden states' (the contract casts it).
    """

    name: str
    tokens: tuple[int, ...] = (2, 13)
    dim: int = 32
    vocab: int = 300
    head_layout: HeadLayout = "dv"
    dtype: str = "float32"
    head_dtype: str | None = None
    masked: bool = True
    z_loss: bool = False
    soft_cap: float | None = None
    temperature: float = 1.0
    logit_std: float = 2.0

    def __str__(self) -> str:
        return self.name


#: The cases every cross-entropy kernel must pass.
CASES: tuple[CrossEntropyCase, ...] = (
    CrossEntropyCase("dv-f32-v300"),
    CrossEntropyCase("vd-tied-f32-v300", head_layout="vd"),
    CrossEntropyCase("no-mask-v129", vocab=129, masked=False),
    CrossEntropyCase("z-loss-vd", head_layout="vd", z_loss=True, vocab=517),
    CrossEntropyCase("soft-cap-dv", soft_cap=30.0, logit_std=40.0, z_loss=True),
    CrossEntropyCase(
        "temperature-soft-cap-vd",
        head_layout="vd",
        soft_cap=30.0,
        temperature=0.7,
        logit_std=40.0,
        z_loss=True,
    ),
    CrossEntropyCase("flat-tokens-n37", tokens=(37,), dim=48, vocab=1000),
    CrossEntropyCase(
        "bf16-f32-head-vd", head_layout="vd", dtype="bfloat16", head_dtype="float32", z_loss=True
    ),
    CrossEntropyCase(
        "bf16-soft-cap-tied",
        head_layout="vd",
        dtype="bfloat16",
        soft_cap=30.0,
        logit_std=40.0,
        z_loss=True,
    ),
    CrossEntropyCase("gpt2-vocab-50257", tokens=(2, 3), dim=16, vocab=50257, head_layout="vd"),
    CrossEntropyCase("qwen-vocab-151936", tokens=(4,), dim=8, vocab=151936, z_loss=True),
    CrossEntropyCase(
        "gemma-vocab-262208-bf16",
        tokens=(1, 3),
        dim=8,
        vocab=262208,
        head_layout="vd",
        dtype="bfloat16",
        soft_cap=30.0,
        logit_std=40.0,
    ),
)

#: Tolerances per hidden dtype: max |kernel - reference| <= tol * max(1, max |reference|).
TOLERANCES: dict[str, dict[str, float]] = {
    "float32": {"out": 5e-5, "grad": 5e-5},
    "bfloat16": {"out": 2e-4, "grad": 3e-2},
}
