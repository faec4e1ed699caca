"""The on-disk format of a token store: file names, the manifest, and how a store is identified.

A store is a directory::

    manifest.json              what is below, with every file's size and sha256, and its own
                               sha256 (see ``_manifest``: every reader checks it)
    tokenizer/                 the tokenizer's files (none for the byte tokenizer)
    train/00000.tokens         uint16 (vocabulary <= 65536) or uint32 token ids, documents one
                               after another, each with its BOS/EOS
    train/00000.starts         int64: where each document starts, in tokens from the shard's start
    train/00000.mask           uint8: each token's loss weight as a target (shards with chat or
                               prompt/completion examples only; absent: every token counts)
    train/00000.pairs          int64 [documents, 2]: the chosen side's length in tokens and the
                               source line of each preference pair (shards with pairs only)
    eval/00000.*               the held-out split, the same way

A preference pair is one document: its chosen example then its rejected example, each with its
own BOS/EOS and loss weights on its response alone. One document, so that everything that works
per document keeps a pair whole: the held-out split, the token cap on it, chunks, shards, and
packing into rows. A store holding pairs has format version 2 (:data:`PAIRS_VERSION`), so a
reader that does not know the ``pairs`` file refuses it rather than training on both sides.

Shard ``k`` of both splits comes from the same stretch of the input.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from typing import Any

import numpy as np

FORMAT = "zoo-token-store"
VERSION = 1
PAIRS_VERSION = 2  # a store with preference pairs: readers of version 1 must refuse it
#: The newest store format this zoo-data writes and reads: zoo-data's contract with every reader
#: of a store. A change of it is a zoo-data minor (readable by older code) or major release.
STORE_FORMAT_VERSION = PAIRS_VERSION
MANIFEST = "manifest.json"
SPLITS = ("train", "eval")
TOKENS, STARTS, MASK, PAIRS = "tokens", "starts", "mask", "pairs"


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 when every id fits, else uint32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


def shard_file(split: str, index: int, what: str) -> str:
    """The path of one of a shard's files, relative to the store."""
    return f"{split}/{index:05d}.{what}"


def content_fingerprint(manifest: dict[str, Any]) -> str:
    """The store's identity: its tokenizer, token dtype and every shard's checksums. Two stores
    with the same tokens, boundaries and masks have the same fingerprint wherever their inputs
    lay; any change to the data changes it."""
    content = {
        "version": manifest["version"],
        "tokenizer": manifest["tokenizer"]["fingerprint"],
        "dtype": manifest["dtype"],
        "shards": [
            [s["split"], s["index"], [[f["name"], f["sha256"]] for f in s["files"]]]
            for s in manifest["shards"]
        ],
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def write_json(path: pathlib.Path, data: dict[str, Any]) -> None:
    """Write ``data`` atomically (a temporary file renamed over ``path``, both synced)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    sync_dir(path.parent)


def sync_dir(directory: pathlib.Path) -> None:
    """Make renames inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_store(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a token store directory (it has a manifest)."""
    return (pathlib.Path(path) / MANIFEST).is_file()
