"""How many tokens one tile of ``fused_xla`` holds: its float32 logits (of the device's share
of the vocabulary) within a fixed budget per device, and a tile count that divides the tokens
when one is near."""

from __future__ import annotations

import os

from ._spec import CrossEntropySpec

#: Bytes of one tile's float32 logits on one device. The tile's step holds about three
#: arrays of its size (logits, probabilities, their gradient), whatever the batch.
TILE_BYTES = 64 * 2**20
#: Overrides the tokens per tile (all devices together) for tuning and tests.
TILE_ENV = "ZOO_FUSED_XLA_TILE_TOKENS"


def _budget_tokens(spec: CrossEntropySpec, loops: int) -> int:
    override = os.environ.get(TILE_ENV, "").strip()
    if override:
        try:
            tokens = int(override)
        except ValueError:
            tokens = 0
        if tokens <= 0:
            raise ValueError(f"{TILE_ENV} must be a positive integer, got {override!r}.")
        return max(1, tokens // loops)
    per_device = max(8, TILE_BYTES // (4 * spec.vocab))
    return per_device * spec.token_shards


def tile_tokens(spec: CrossEntropySpec, loops: int = 1) -> int:
    """Tokens per tile of the loop over ``spec.tokens`` tokens, ``spec.token_shards`` devices
    sharing each tile (XLA partitioning the loop), or ``loops`` devices each running a loop
    over its own tokens (``shard_map``; :data:`TILE_ENV` counts all devices' tokens).

    Every token in one tile when they fit the budget; else the largest tile within it, down
    to half of it, that divides the tokens evenly and is a multiple of the devices sharing
    them (else the budget, the tokens padded to a whole number of tiles)."""
    budget = _budget_tokens(spec, loops)
    if spec.tokens <= budget:
        return spec.tokens
    shards = spec.token_shards
    for tokens in range(budget, budget // 2, -1):
        if spec.tokens % tokens == 0 and tokens % shards == 0:
            return tokens
    return budget
