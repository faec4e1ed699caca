"""Packing documents into fixed-length rows with segment ids and per-document positions.

A row holds ``seq_len + 1`` tokens so that inputs are ``row[:-1]`` and targets ``row[1:]``.
Documents follow one another; a document that does not fit continues in the next row as a new
segment whose positions restart at 0. Segment ids number the pieces in a row ``1, 2, …``; ``0``
marks padding. A target counts only when it belongs to the same segment as its input, so the
loss never predicts across a document (or row) boundary.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# input_ids, targets, positions, segment_ids: int32 [B, T]; loss_mask: float32 [B, T]
Batch = dict[str, np.ndarray]


def pack_documents(
    token_docs: Sequence[np.ndarray],
    seq_len: int,
    *,
    order: np.ndarray | None = None,
    pad_id: int = 0,
    drop_remainder: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pack documents (in ``order``) into rows of ``seq_len + 1`` tokens.

    Args:
        token_docs: one int array per document (already holding its EOS, if any).
        seq_len: ``T``, the model's input length.
        order: a permutation of document indices; default the given order.
        pad_id: the token id used for padding.
        drop_remainder: drop the last partial row (training) instead of padding it (evaluation).

    Returns:
        ``(tokens, segment_ids, positions)``, each int32 ``[R, T + 1]``.
    """
    if seq_len < 1:
        raise ValueError(f"`seq_len` must be at least 1, got {seq_len}.")
    width = seq_len + 1
    if order is None:
        order = np.arange(len(token_docs))
    docs = [np.asarray(token_docs[i], dtype=np.int32) for i in order]
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    stream = np.concatenate(docs) if docs else np.zeros((0,), np.int32)
    # int32 throughout: the temporaries of a re-pack are most of a loader's peak memory.
    owner = np.repeat(np.arange(len(docs), dtype=np.int32), lengths)
    num_rows = len(stream) // width if drop_remainder else -(-len(stream) // width)
    size = num_rows * width
    if size <= len(stream):
        stream, owner = stream[:size], owner[:size]
    else:
        pad = size - len(stream)
        stream = np.concatenate([stream, np.full((pad,), pad_id, np.int32)])
        owner = np.concatenate([owner, np.full((pad,), -1, np.int32)])
    tokens = stream.reshape(num_rows, width)
    owner = owner.reshape(num_rows, width)
    starts = np.ones(owner.shape, dtype=bool)
    starts[:, 1:] = owner[:, 1:] != owner[:, :-1]
    segment_ids, positions = segments_from_starts(starts, owner < 0)
    return tokens, segment_ids, positions


def segments_from_starts(
    starts: np.ndarray, padding: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(segment_ids, positions)``, int32 ``[R, W]``, of rows whose segments begin where
    ``starts`` (bool ``[R, W]``, true in column 0) is true: segments numbered ``1, 2, …`` in
    each row, positions counted from each segment's start; 0 for both where ``padding``."""
    cols = np.broadcast_to(np.arange(starts.shape[1], dtype=np.int32), starts.shape)
    segment_ids = np.cumsum(starts, axis=1, dtype=np.int32)
    run_start = np.maximum.accumulate(np.where(starts, cols, np.int32(0)), axis=1)
    positions = cols - run_start
    if padding is not None:
        segment_ids[padding] = 0
        positions[padding] = 0
    return segment_ids, positions


def rows_to_batch(
    tokens: np.ndarray,
    segment_ids: np.ndarray,
    positions: np.ndarray,
    weights: np.ndarray | None = None,
) -> Batch:
    """Turn packed rows ``[B, T + 1]`` into a model batch ``[B, T]``.

    ``weights`` ``[B, T + 1]`` (packed like the tokens) is each token's loss weight as a
    target, e.g. 0 on the prompt of an instruction example; default 1 everywhere.

    Returns:
        ``input_ids``, ``targets``, ``positions``, ``segment_ids`` (int32) and ``loss_mask``
        (float32, the target's weight where it is the next token of the same segment, else 0).
    """
    seg_in, seg_out = segment_ids[:, :-1], segment_ids[:, 1:]
    mask = (seg_in == seg_out) & (seg_in > 0)
    if weights is not None:
        mask = mask * weights[:, 1:]
    return {
        "input_ids": np.ascontiguousarray(tokens[:, :-1], dtype=np.int32),
        "targets": np.ascontiguousarray(tokens[:, 1:], dtype=np.int32),
        "positions": np.ascontiguousarray(positions[:, :-1], dtype=np.int32),
        "segment_ids": np.ascontiguousarray(seg_in, dtype=np.int32),
        "loss_mask": mask.astype(np.float32),
    }
