"""What a store holds: ``info`` (documents, tokens, shards, tokenizer, splits, sources)."""

from __future__ import annotations

import os
from typing import Any

from .._pairs import skipped_sentence
from ._blocks import block_info
from ._manifest import read_manifest

_SHOWN = 8  # sources listed by name; the rest are counted


def store_info(store: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON-ready summary of the store at ``store``: ``path``, ``fingerprint``, ``documents``,
    ``tokens``, ``examples``, ``pairs`` (preference pairs), ``shards``, ``bytes`` (on disk), ``dtype``, ``tokenizer`` (its
    description, fingerprint, vocabulary size, BOS/EOS ids), ``splits`` (documents, tokens,
    examples and shards of ``train`` and ``eval``), ``sources``, ``skipped`` files and
    ``block_hashes`` (``{"bytes", "hash"}`` of its blocks, ``None`` when it carries none).

    Raises:
        ValueError: ``store`` is not a token store.
    """
    m = read_manifest(store)
    splits = m["splits"]
    return {
        "path": os.fspath(store),
        "fingerprint": m["fingerprint"],
        "documents": sum(s["documents"] for s in splits.values()),
        "tokens": sum(s["tokens"] for s in splits.values()),
        "examples": sum(s["examples"] for s in splits.values()),
        "pairs": sum(s.get("pairs", 0) for s in splits.values()),
        "shards": len(m["shards"]),
        "bytes": sum(f["bytes"] for s in m["shards"] for f in s["files"]),
        "dtype": m["dtype"],
        "tokenizer": m["tokenizer"],
        "eval_fraction": m["settings"]["eval_fraction"],
        "splits": splits,
        "sources": m["sources"],
        "skipped": m["skipped"],
        "block_hashes": block_info(m),
    }


def describe_info(summary: dict[str, Any]) -> str:
    """:func:`store_info` as lines for a person."""
    tok = summary["tokenizer"]
    lines = [
        f"store       {summary['path']}",
        f"fingerprint {summary['fingerprint'][:16]}",
        f"documents   {summary['documents']:,}"
        + (
            f" ({summary['pairs']:,} preference pairs)"
            if summary["pairs"]
            else f" ({summary['examples']:,} chat or prompt/completion)"
            if summary["examples"]
            else ""
        ),
        f"tokens      {summary['tokens']:,} ({summary['dtype']})",
        f"shards      {summary['shards']} ({summary['bytes'] / 2**20:,.1f} MiB)",
        f"tokenizer   {tok['description']} (vocabulary {tok['vocab_size']:,}, "
        f"fingerprint {tok['fingerprint'][:12]})",
    ]
    hashes = summary.get("block_hashes")
    lines.append(
        f"hashes      {hashes['hash']} per {hashes['bytes'] / 2**20:g} MiB block"
        if hashes
        else "hashes      none (an older store: reads are not checked, and `zoo data verify` "
        "checks whole-file checksums; prepare it again with --overwrite to add them)"
    )
    for name, split in summary["splits"].items():
        lines.append(f"{name:<11} {split['documents']:,} documents, {split['tokens']:,} tokens")
    sources = summary["sources"]
    for src in sources[:_SHOWN]:
        lines.append(f"source      {src['source']} ({src['files']} files, {src['bytes']:,} bytes)")
    if len(sources) > _SHOWN:
        rest = sources[_SHOWN:]
        lines.append(
            f"            and {len(rest):,} more sources ({sum(s['files'] for s in rest):,} files, "
            f"{sum(s['bytes'] for s in rest):,} bytes; --json lists them)"
        )
    if summary["skipped"]["files"]:
        lines.append(
            f"skipped     {summary['skipped']['files']} binary or non-UTF-8 file(s) "
            f"(e.g. {summary['skipped']['example']})"
        )
    for reason, (count, first) in (summary["skipped"].get("pairs") or {}).items():
        lines.append(
            f"skipped     {skipped_sentence(reason, count, first).removeprefix('skipped ')}"
        )
    return "\n".join(lines)
