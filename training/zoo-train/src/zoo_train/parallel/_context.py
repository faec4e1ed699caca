"""The ``context`` axis: sequences split over devices, and causal work balanced across them.

Batches and activations are split along their sequence by the ``sequence`` rule (``context``
by default); attention gathers keys and values over it (``zoo_attention.context``). Split into
contiguous blocks, a causal sequence gives the last device most of the work, so a step lays
each batch out in the dual-chunk order first (device ``d`` holds chunks ``d`` and ``2C-1-d``)
and tells attention so. Every ``[B, T]`` entry moves together (tokens, targets, positions,
segment ids, loss mask), so positions and documents stay global and a per-token mean loss is
unchanged.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import jax

import zoo_layers
from zoo_attention.context import to_dual_chunk

from ._rules import MeshAxes, rule_axes


def sequence_shards(sizes: Mapping[str, int], rules: Mapping[str, Any]) -> int:
    """How many ways the ``sequence`` rule splits a sequence on a mesh of axis ``sizes``."""
    return math.prod(sizes.get(a, 1) for a in rule_axes(rules, zoo_layers.SEQUENCE))


def _sequence_length(batch: Mapping[str, jax.Array]) -> int | None:
    ids = batch.get("input_ids")
    return None if ids is None or ids.ndim != 2 else int(ids.shape[1])


@contextlib.contextmanager
def balanced_sequences(batch: dict[str, jax.Array]) -> Iterator[dict[str, jax.Array]]:
    """Inside a step traced under a mesh and axis rules: ``batch`` with every ``[B, T]``
    entry in the dual-chunk order, and attention told so for the block; ``batch`` unchanged
    (and nothing told) when the sequence is not split, or ``T`` is not a multiple of twice
    the shards."""
    rules: Mapping[str, MeshAxes] | None = zoo_layers.current_rules()  # type: ignore[assignment]
    mesh = jax.sharding.get_abstract_mesh()
    length = _sequence_length(batch)
    shards = 1 if rules is None or mesh.empty else sequence_shards(dict(mesh.shape), rules)
    if rules is None or length is None or shards == 1 or length % (2 * shards):
        yield batch
        return
    laid = {
        name: to_dual_chunk(x, shards) if x.ndim == 2 and x.shape[1] == length else x
        for name, x in batch.items()
    }
    with zoo_layers.axis_rules(rules, balanced=True):
        yield laid
