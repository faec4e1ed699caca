"""Shapes the tiny presets share: small enough for tests, large enough for every feature."""

from __future__ import annotations

from typing import Any

__all__ = ["TINY", "TINY_IDS"]

TINY: dict[str, Any] = dict(vocab_size=256, d_model=64, n_layers=2, n_heads=4, max_position=128)
TINY_IDS: dict[str, Any] = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
