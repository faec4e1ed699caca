"""Packing against a plain-Python reference: segment ids, positions, targets, the loss mask."""

import numpy as np
import pytest

from zoo_data import PackedLoader, pack_documents, rows_to_batch


def reference_rows(docs, seq_len, order, pad_id, drop_remainder):
    """Token by token: fill rows of seq_len + 1, tracking (doc, piece start) per slot."""
    width = seq_len + 1
    stream = [(int(t), d) for d in order for t in docs[d]]
    rows, cur = [], []
    for item in stream:
        cur.append(item)
        if len(cur) == width:
            rows.append(cur)
            cur = []
    if cur and not drop_remainder:
        rows.append(cur + [(pad_id, None)] * (width - len(cur)))
    out_t, out_s, out_p = [], [], []
    for row in rows:
        toks, segs, poss = [], [], []
        seg, pos, prev = 0, 0, object()
        for tok, doc in row:
            if doc is None:
                toks.append(pad_id), segs.append(0), poss.append(0)
                continue
            if doc != prev:
                seg, pos, prev = seg + 1, 0, doc
            toks.append(tok), segs.append(seg), poss.append(pos)
            pos += 1
        out_t.append(toks), out_s.append(segs), out_p.append(poss)
    return np.array(out_t), np.array(out_s), np.array(out_p)


@pytest.mark.parametrize("drop_remainder", [True, False])
@pytest.mark.parametrize("seq_len", [1, 7, 16])
def test_pack_matches_reference(seq_len, drop_remainder):
    rng = np.random.default_rng(seq_len)
    docs = [rng.integers(0, 50, rng.integers(1, 30)) for _ in range(25)]
    order = rng.permutation(len(docs))
    got = pack_documents(docs, seq_len, order=order, pad_id=99, drop_remainder=drop_remainder)
    want = reference_rows(docs, seq_len, order, 99, drop_remainder)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_batch_targets_never_cross_documents():
    rng = np.random.default_rng(1)
    docs = [np.append(rng.integers(0, 50, rng.integers(1, 20)), 63) for _ in range(30)]
    tokens, seg, pos = pack_documents(docs, 12, drop_remainder=False, pad_id=63)
    b = rows_to_batch(tokens, seg, pos)
    # Rebuild, per row, which document each slot came from (reference walk over the stream).
    stream_doc = np.concatenate([np.full(len(d), i) for i, d in enumerate(docs)])
    width = 13
    owner = np.full(tokens.size, -1)
    owner[: len(stream_doc)] = stream_doc
    owner = owner.reshape(tokens.shape)
    for r in range(tokens.shape[0]):
        for t in range(12):
            same_doc = owner[r, t] >= 0 and owner[r, t] == owner[r, t + 1]
            assert b["loss_mask"][r, t] == float(same_doc)
            if same_doc:
                assert b["targets"][r, t] == tokens[r, t + 1]
    np.testing.assert_array_equal(b["input_ids"], tokens[:, :-1])
    np.testing.assert_array_equal(b["segment_ids"], seg[:, :-1])
    # Positions restart at every new segment and count up inside one.
    for r in range(tokens.shape[0]):
        for t in range(1, 12):
            s, p = b["segment_ids"][r], b["positions"][r]
            if s[t] > 0:
                assert p[t] == (p[t - 1] + 1 if s[t] == s[t - 1] else 0)
    assert tokens.shape[1] == width


def test_pack_rejects_bad_seq_len():
    with pytest.raises(ValueError, match="seq_len"):
        pack_documents([np.arange(5)], 0)


def test_eval_batches_cover_every_token_once_with_fixed_shapes():
    rng = np.random.default_rng(2)
    docs = [rng.integers(0, 50, rng.integers(2, 25)).astype(np.int32) for _ in range(11)]
    loader = PackedLoader(docs, seq_len=8, shuffle=False, pad_id=0)
    batches = list(loader.eval_batches(3))
    assert all(b["input_ids"].shape == (3, 8) for b in batches)
    counted = sum(int(b["loss_mask"].sum()) for b in batches)
    # Each document of length L is cut into pieces; every piece of length m yields m - 1 targets.
    tokens, seg, _ = pack_documents(docs, 8, drop_remainder=False)
    pieces = [np.sum(row == s) for row in seg for s in set(row.tolist()) - {0}]
    assert counted == sum(int(m) - 1 for m in pieces)
    assert counted > 0 and tokens.shape[0] <= 3 * len(batches)
