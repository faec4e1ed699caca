"""Reading a store's manifest, and not believing it: every reader (``info``, ``verify``, a
store opened for training, a prepare finding a store in place) gets a manifest that was checked
against itself and against what its shard files can be.

- Its shape: the fields readers use, of the types they use them as; a bad one is named with the
  file, never a ``KeyError`` deep in a reader.
- Its names: every shard file is ``SPLIT/NNNNN.KIND`` of its own shard (``train/00000.tokens``),
  so no name reaches outside the store's directory.
- Its hashes: the fingerprint (the store's identity, from the tokenizer, token dtype and every
  file's sha256) and, for stores prepared since manifests carried one, ``manifest_sha256`` over
  the whole manifest, must be what its content gives.
- Its counts: a shard's tokens times the dtype's width are its tokens file's bytes, its
  documents times 8 its starts file's, masks and pairs likewise; a split's totals are its
  shards' sums; the dtype is the one the tokenizer's vocabulary gives. The files' sizes on disk
  are checked against the manifest when the store opens, so an edited count or dtype cannot
  pass both.

A hash proves the manifest unchanged, not unforged: the counts are what stops a forgery that
recomputes the hashes from misreading the tokens.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pathlib
from typing import Any

from ..inputs import DocumentStream
from ._blocks import ALGORITHM, BLOCK_BYTES
from ._format import (
    FORMAT,
    MANIFEST,
    MASK,
    PAIRS,
    PAIRS_VERSION,
    SPLITS,
    STARTS,
    STORE_FORMAT_VERSION,
    TOKENS,
    VERSION,
    content_fingerprint,
    shard_file,
    token_dtype,
)

#: The manifest's own checksum's key: a sha256 of the manifest without it.
CHECKSUM = "manifest_sha256"
#: Bytes per item of each kind of shard file, besides tokens (whose width is the dtype's).
_ITEM_BYTES = {STARTS: 8, MASK: 1, PAIRS: 16}
_COUNTS = ("documents", "tokens", "examples", "pairs")


def manifest_checksum(manifest: dict[str, Any]) -> str:
    """The sha256 of ``manifest`` without its own checksum (JSON, keys sorted)."""
    content = {k: v for k, v in manifest.items() if k != CHECKSUM}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shape_problem(m: dict[str, Any]) -> str | None:
    """What makes ``m`` unreadable (a field missing or of another type), or ``None``."""
    if not isinstance(m.get("tokenizer"), dict) or not isinstance(
        m["tokenizer"].get("fingerprint"), str
    ):
        return "its tokenizer record is missing or malformed"
    if m.get("dtype") not in ("uint16", "uint32"):
        return f"its token dtype {str(m.get('dtype'))[:40]!r} is not uint16 or uint32"
    if not isinstance(m.get("fingerprint"), str):
        return "it records no fingerprint"
    for key in ("splits", "settings", "skipped"):
        if not isinstance(m.get(key), dict):
            return f"its {key!r} is missing or malformed"
    if not isinstance(m.get("sources"), list) or not isinstance(m.get("shards"), list):
        return "its sources or shards are missing or malformed"
    for shard in m["shards"]:
        if not isinstance(shard, dict) or shard.get("split") not in SPLITS:
            return "a shard record names no split"
        if not _count(shard.get("index")) or not isinstance(shard.get("files"), list):
            return "a shard record has no index or file list"
        if not all(_count(shard.get(k, 0)) for k in _COUNTS):
            return f"shard {shard['split']}/{shard['index']} has a count that is not a count"
        for record in shard["files"]:
            if not isinstance(record, dict) or not isinstance(record.get("name"), str):
                return f"shard {shard['split']}/{shard['index']} lists a file without a name"
            if not _count(record.get("bytes")) or not isinstance(record.get("sha256"), str):
                return f"{record['name'][:80]!r} has no size or checksum"
    for split in SPLITS:
        totals = m["splits"].get(split)
        if not isinstance(totals, dict) or not all(_count(totals.get(k, 0)) for k in _COUNTS):
            return f"its {split} split's counts are missing or malformed"
    return None


def _name_problem(shard: dict[str, Any], record: dict[str, Any]) -> str | None:
    """A file name that is not one of its shard's own (``..``, absolute, another shard's)."""
    name = record["name"]
    kind = name.rsplit(".", 1)[-1]
    if kind not in (TOKENS, *_ITEM_BYTES) or name != shard_file(
        shard["split"], shard["index"], kind
    ):
        return (
            f"it names a shard file {name[:80]!r} that is not {shard['split']}/"
            f"{shard['index']:05d}.KIND, so it could lie outside the store"
        )
    return None


def _count_problem(m: dict[str, Any], dtype_bytes: int, block_bytes: int | None) -> str | None:
    """A count, size or block list the shard files contradict, or ``None``."""
    sums = {split: dict.fromkeys(_COUNTS, 0) | {"shards": 0} for split in SPLITS}
    for shard in m["shards"]:
        where = f"shard {shard['split']}/{shard['index']:05d}"
        files = {record["name"].rsplit(".", 1)[-1]: record for record in shard["files"]}
        items = {TOKENS: shard.get("tokens", 0), STARTS: shard.get("documents", 0)}
        items |= {MASK: items[TOKENS], PAIRS: items[STARTS]}
        if files and (TOKENS not in files or STARTS not in files):
            return f"{where} lacks its tokens or starts file"
        for kind, record in files.items():
            width = dtype_bytes if kind == TOKENS else _ITEM_BYTES[kind]
            if record["bytes"] != items[kind] * width:
                return (
                    f"{record['name']} holds {record['bytes']:,} bytes, not the "
                    f"{items[kind]:,} x {width} its counts and dtype say"
                )
            digests = record.get("blocks")
            if block_bytes is not None and digests is not None:
                want = math.ceil(record["bytes"] / block_bytes)
                if not isinstance(digests, list) or len(digests) != want:
                    return f"{record['name']} lists another number of block hashes than its size"
        for key in _COUNTS:
            sums[shard["split"]][key] += shard.get(key, 0)
        sums[shard["split"]]["shards"] += bool(files)
    for split, summed in sums.items():
        recorded = m["splits"][split]
        for key, value in summed.items():
            if recorded.get(key, 0) != value:
                return (
                    f"its {split} split records {recorded.get(key, 0):,} {key}, and its shards "
                    f"hold {value:,}"
                )
    return None


def _hash_problem(m: dict[str, Any]) -> str | None:
    if content_fingerprint(m) != m["fingerprint"]:
        return "its content does not give its fingerprint"
    if CHECKSUM in m and manifest_checksum(m) != m[CHECKSUM]:
        return f"its content does not give its {CHECKSUM}"
    return None


def check_manifest(m: dict[str, Any], where: str) -> None:
    """Refuse a manifest that its own hashes or its files' sizes contradict.

    Args:
        m: a manifest of this format (version checked already).
        where: the manifest's file, for the sentence.

    Raises:
        ValueError: one sentence naming the file and the first problem found.
    """
    problem = _shape_problem(m)
    for shard in m["shards"] if problem is None else ():
        for record in shard["files"]:
            problem = problem or _name_problem(shard, record)
    if problem is None:
        problem = _hash_problem(m)
    if problem is None:
        blocks = m.get("blocks")
        block_bytes = blocks.get("bytes") if isinstance(blocks, dict) else None
        size = 2 if m["dtype"] == "uint16" else 4
        problem = _count_problem(m, size, block_bytes if _count(block_bytes) else None)
    if problem is None:
        vocab = m["tokenizer"].get("vocab_size")
        if _count(vocab) and token_dtype(vocab).name != m["dtype"]:
            problem = f"its dtype {m['dtype']} is not the one a vocabulary of {vocab:,} takes"
    if problem is not None:
        raise ValueError(
            f"The token store manifest {where!r} was edited or damaged: {problem}; prepare the "
            "store again (`zoo data prepare ... --overwrite`) or restore it from a good copy."
        )


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of the store at ``path``, checked (see the module's description).

    Raises:
        ValueError: ``path`` is not a token store, one of a newer format, or its manifest is
            not JSON, or was edited or damaged.
    """
    file = pathlib.Path(path) / MANIFEST
    if not file.is_file():
        raise ValueError(
            f"{os.fspath(path)!r} is not a token store (no {MANIFEST}); make one with "
            "`zoo data prepare SOURCE... --out STORE`."
        )
    try:
        manifest = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        why = " ".join(str(e).split())[:120] or type(e).__name__
        raise ValueError(
            f"The token store manifest {str(file)!r} is not valid JSON ({why}); prepare the store "
            "again (`zoo data prepare ... --overwrite`) or restore it from a good copy."
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{str(file)!r} is not a token store manifest; pass a store directory.")
    version = manifest.get("version", 0)
    if not _count(version):
        raise ValueError(f"{str(file)!r} records no format version; pass a store directory.")
    if version > STORE_FORMAT_VERSION:
        raise ValueError(
            f"The store {os.fspath(path)!r} has format version {version}, newer than "
            f"this zoo-data reads ({STORE_FORMAT_VERSION}); upgrade zoo-data."
        )
    check_manifest(manifest, str(file))
    return manifest


def make_manifest(
    settings: dict[str, Any],
    identity: dict[str, Any],
    dtype: Any,
    sources: list[dict[str, Any]],
    stream: DocumentStream,
    shards: list[dict[str, Any]],
) -> dict[str, Any]:
    """The manifest of a prepared store: what it holds, its fingerprint and its checksum."""
    splits = {
        split: {
            key: sum(s.get(key, 0) for s in shards if s["split"] == split)
            for key in ("documents", "tokens", "examples", "pairs")
        }
        | {"shards": sum(1 for s in shards if s["split"] == split)}
        for split in SPLITS
    }
    pairs = any(s.get("pairs") for s in shards)
    manifest = {
        "format": FORMAT,
        "version": PAIRS_VERSION if pairs else VERSION,
        "tokenizer": identity,
        "dtype": dtype.name,
        "settings": settings,
        "sources": sources,
        "skipped": {
            "files": len(stream.skipped),
            "example": str(stream.skipped[0]) if stream.skipped else None,
            # preference pairs without a preference: reason -> [count, the first one's place]
            "pairs": stream.skipped_pairs,
        },
        "splits": splits,
        "shards": shards,
        # each shard file's "blocks": the hash of every block of this many bytes
        "blocks": {"bytes": BLOCK_BYTES, "hash": ALGORITHM},
    }
    manifest["fingerprint"] = content_fingerprint(manifest)
    manifest[CHECKSUM] = manifest_checksum(manifest)  # what readers check it against
    return manifest
