"""The batch a step takes, as abstract arrays: what ``zoo compile`` lowers the step with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from zoo_data import rows_to_batch

from .._loss import LossFn
from ..parallel import batch_shardings


def batch_fields(loss_fn: LossFn | None) -> dict[str, np.dtype]:
    """The fields of a batch ``[B, T]`` the loss reads, with their dtypes: those of packed rows
    (``rows_to_batch``) and any the loss declares in ``extra_inputs`` (e.g. the reference
    log-probabilities of a preference loss)."""
    tokens = np.zeros((1, 2), np.int32)
    fields = {k: v.dtype for k, v in rows_to_batch(tokens, tokens + 1, tokens).items()}
    extra: Mapping[str, Any] = getattr(loss_fn, "extra_inputs", None) or {}
    return {**fields, **{k: np.dtype(v) for k, v in extra.items()}}


def abstract_batch(
    rows: int,
    seq_len: int,
    mesh: Mesh,
    rules: Mapping[str, Any],
    loss_fn: LossFn | None = None,
) -> dict[str, jax.ShapeDtypeStruct]:
    """A batch of ``rows`` packed rows of ``seq_len`` tokens for ``loss_fn`` as
    ``ShapeDtypeStruct``s ``[rows, seq_len]``, split over the mesh by the batch rule."""
    shapes = {
        k: jax.ShapeDtypeStruct((rows, seq_len), dtype)
        for k, dtype in batch_fields(loss_fn).items()
    }
    shardings = batch_shardings(shapes, mesh, rules)
    return {
        k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=shardings[k]) for k, v in shapes.items()
    }
