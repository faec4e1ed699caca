"""Model FLOPs of a decoder-only transformer train step (PaLM, appendix B)."""

from __future__ import annotations

FORMULA = (
    "model FLOPs per token = 6·N + 12·L·T·d, where N counts every parameter that enters a "
    "matmul (all parameters except the learned position table; the tied token embedding counts "
    "once, as the output head), L = layers, T = sequence length, d = width. The 12·L·T·d term "
    "is the attention score and value products (forward + backward, causal masking not "
    "discounted). Embedding lookups, norms, softmax and the optimizer are not counted."
)


def flops_per_token(matmul_params: int, n_layers: int, seq_len: int, d_model: int) -> float:
    """``6 N + 12 L T d`` (see :data:`FORMULA`)."""
    return 6.0 * matmul_params + 12.0 * n_layers * seq_len * d_model


def gpt2_matmul_params(total_params: int, n_positions: int, d_model: int) -> int:
    """Parameters that enter a matmul in tied GPT-2: all but the position table."""
    return total_params - n_positions * d_model
