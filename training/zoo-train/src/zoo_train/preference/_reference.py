"""The reference log-probabilities of full fine-tuning: computed once, before the first step,
with the model as it starts, and kept with the run (``OUT/reference/``), so a resumed run reads
them instead of needing the starting weights again, and no second copy of the model is held.

A table per split: ``[documents, 2]`` float32, each pair's chosen and rejected
log-probabilities (NaN for a pair no row holds). A side's value does not depend on the rows it
is packed into (segments are kept apart, positions restart), so one table serves any
``--seq-len`` and batch size.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from zoo_data.store import TokenSplit, layout

from ..parallel import (
    BatchLayout,
    MeshFunction,
    batch_shardings,
    is_primary,
    replicated,
)
from ._logps import side_sums, token_logps

REFERENCE_DIR = "reference"


def reference_path(out: str | os.PathLike[str], split: TokenSplit) -> pathlib.Path:
    """Where a run keeps the reference table of ``split`` (named by its store and split)."""
    return pathlib.Path(out) / REFERENCE_DIR / f"{split.key}.npy"


def _padded(batch: dict[str, np.ndarray], rows: int) -> dict[str, np.ndarray]:
    """Rows of nothing (segment 0, no weight) added up to ``rows``."""
    return {
        k: np.concatenate([v, np.zeros((rows - len(v), *v.shape[1:]), v.dtype)])
        for k, v in batch.items()
    }


def reference_logps(
    model: PyTree,
    splits: Sequence[TokenSplit],
    *,
    seq_len: int,
    batch_size: int,
    mesh: Any,
    rules: Any,
    compute_dtype: Any = None,
    pad_id: int = 0,
) -> list[np.ndarray]:
    """Each split's table of ``model``'s log-probabilities of every pair's sides, computed in
    batches of ``batch_size`` packed rows of ``seq_len`` on ``mesh`` (every process computes
    the same tables, each reading its own rows)."""

    def sides(m: PyTree, batch: dict[str, Any]) -> Any:
        chosen, rejected = side_sums(token_logps(m, batch, compute_dtype), batch["segment_ids"])
        return jnp.stack([chosen, rejected], axis=-1)

    fn = MeshFunction(
        sides,
        mesh=mesh,
        rules=rules,
        in_shardings=(None, lambda b: batch_shardings(b, mesh, rules)),
        out_shardings=replicated(mesh),
    )
    rows_of = BatchLayout(mesh, rules, batch_size)
    tables = []
    for split in splits:
        lay = layout(split, seq_len, whole=True)
        table = np.full((split.num_documents, 2), np.nan, np.float32)
        for start in range(0, lay.rows, batch_size):
            rows = np.arange(start, min(start + batch_size, lay.rows))
            batch = _padded(lay.read(rows, pad_id), batch_size)
            values = np.asarray(fn(model, rows_of.place(rows_of.local_part(batch))))
            first, count = lay.documents(rows)
            for r, (f, c) in enumerate(zip(first.tolist(), count.tolist(), strict=True)):
                table[f : f + c] = values[r, :c]
        tables.append(table)
    return tables


def read_reference(out: str | os.PathLike[str], splits: Sequence[TokenSplit]) -> bool:
    """Attach the tables a run kept to ``splits``; whether every one was there (else none is
    attached)."""
    paths = [reference_path(out, s) for s in splits]
    if not all(p.is_file() for p in paths):
        return False
    for split, path in zip(splits, paths, strict=True):
        table = np.load(path)
        if table.shape != (split.num_documents, 2):
            return False
        split.reference = table
    return True


def keep_reference(
    out: str | os.PathLike[str], splits: Sequence[TokenSplit], tables: Sequence[np.ndarray]
) -> None:
    """Attach ``tables`` to ``splits`` and write them into the run (process 0; each file
    written whole, then renamed into place)."""
    for split, table in zip(splits, tables, strict=True):
        split.reference = table
        if not is_primary():
            continue
        path = reference_path(out, split)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npy")
        np.save(tmp, table)
        os.replace(tmp, path)
