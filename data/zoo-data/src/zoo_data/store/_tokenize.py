"""Tokenizing a chunk of documents into the arrays a store holds (the work of one worker)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._chat import encode_example
from .._documents import Document
from .._split import held_out
from .._tokenizer import Tokenizer, is_byte_level, leading_bos


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A chunk's documents as tokens.

    Attributes:
        tokens: ``[N]`` every document's ids (BOS and EOS included) one after another.
        lengths: ``[D]`` int64, each document's number of tokens.
        held_out: ``[D]`` bool, documents of the held-out split.
        chosen: ``[D]`` bool, documents whose side was chosen before (``Document.split``).
        mask: ``[N]`` uint8 loss weight of each token as a target (0 on the prompt and the
            user turns of an example), or ``None`` when the chunk holds no example.
        examples: ``[D]`` bool, chat and prompt/completion examples (and preference pairs).
        pairs: ``[D]`` int64, the chosen side's length in tokens of each preference pair (its
            rejected side follows it in the same document), 0 for other documents; ``None``
            when the chunk holds no pair.
        origins: each document's id (``file:line`` for a record), kept for pairs only (a pair
            a run cannot fit in a row is named by it).
    """

    tokens: np.ndarray
    lengths: np.ndarray
    held_out: np.ndarray
    chosen: np.ndarray
    mask: np.ndarray | None
    examples: np.ndarray
    pairs: np.ndarray | None = None
    origins: tuple[str, ...] = ()


class Encoder:
    """Documents → :class:`Encoded`, with the BOS/EOS rule of the rest of zoo: BOS first when
    the tokenizer's configuration adds it, its EOS last (examples: :func:`encode_example`)."""

    def __init__(
        self, tokenizer: Tokenizer, dtype: np.dtype, *, eval_fraction: float, seed: int = 0
    ) -> None:
        self.tokenizer = tokenizer
        self.dtype = np.dtype(dtype)
        self.eval_fraction = eval_fraction
        self.seed = seed
        self.bos = leading_bos(tokenizer)
        self.eos = tokenizer.eos_id
        self._bytes = is_byte_level(tokenizer)
        inner = getattr(tokenizer, "tokenizer", None)
        self._batch = getattr(inner, "encode_batch_fast", None) or getattr(
            inner, "encode_batch", None
        )

    def _plain(self, texts: Sequence[str]) -> list[np.ndarray]:
        if self._bytes:
            return [np.frombuffer(t.encode("utf-8"), np.uint8).astype(self.dtype) for t in texts]
        if self._batch is not None:
            return [
                np.array(e.ids, self.dtype)
                for e in self._batch(list(texts), add_special_tokens=False)
            ]
        return [np.array(self.tokenizer.encode(t), self.dtype) for t in texts]

    def __call__(self, docs: Sequence[Document]) -> Encoded:
        plain = iter(self._plain([d.text for d in docs if not d.turns]))
        bos = np.array([] if self.bos is None else [self.bos], self.dtype)
        eos = np.array([] if self.eos is None else [self.eos], self.dtype)
        parts: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        chosen: list[int] = []
        for doc in docs:
            chosen.append(0)
            if doc.rejected:  # a pair: its chosen example, then its rejected one
                sides = [
                    encode_example(t, self.tokenizer, bos=self.bos, eos=self.eos)
                    for t in (doc.turns, doc.rejected)
                ]
                chosen[-1] = len(sides[0][0])
                parts += [ids.astype(self.dtype) for ids, _ in sides]
                weights.append(np.concatenate([w for _, w in sides]).astype(np.uint8))
                continue
            if doc.turns:
                ids, trained = encode_example(doc.turns, self.tokenizer, bos=self.bos, eos=self.eos)
                parts.append(ids.astype(self.dtype))
                weights.append(trained.astype(np.uint8))
                continue
            ids = next(plain)
            parts += [bos, ids, eos]
            weights.append(np.ones(len(bos) + len(ids) + len(eos), np.uint8))
        lengths = np.array([len(w) for w in weights], np.int64)
        examples = np.array([bool(d.turns) for d in docs], bool)
        paired = any(chosen)
        return Encoded(
            tokens=np.concatenate(parts) if parts else np.zeros(0, self.dtype),
            lengths=lengths,
            held_out=np.array(
                [
                    d.split == "eval"
                    if d.split
                    else held_out(d.id, self.eval_fraction, seed=self.seed)
                    for d in docs
                ],
                bool,
            ),
            chosen=np.array([bool(d.split) for d in docs], bool),
            mask=np.concatenate(weights) if examples.any() else None,
            examples=examples,
            pairs=np.array(chosen, np.int64) if paired else None,
            origins=tuple(d.id for d in docs) if paired else (),
        )
