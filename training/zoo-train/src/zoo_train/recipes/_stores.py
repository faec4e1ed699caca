"""Each data source of a run as a token store: a store as it is, raw data prepared once into
the data cache (and found there by the next start, and by other runs of the same inputs and
tokenizer)."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Sequence
from typing import Any

from .._console import is_terminal
from .._usage import UsageError
from ..parallel import barrier, is_primary
from ..settings import RunSettings

#: The data cache's directory name beside the output directory (``--data-cache`` overrides).
CACHE_DIR = ".zoo-data-cache"


def data_cache(s: RunSettings) -> pathlib.Path:
    """Where raw data is prepared: ``--data-cache``, else ``.zoo-data-cache`` beside ``--out``."""
    if s.data_cache is not None:
        return pathlib.Path(s.data_cache)
    return pathlib.Path(s.out).absolute().parent / CACHE_DIR


def _key(sources: Sequence[str], tokenizer: Any, text_field: str, eval_fraction: float) -> str:
    from zoo_data.store import VERSION, tokenizer_identity

    facts = {
        "sources": [os.path.abspath(s) for s in sources],
        "tokenizer": tokenizer_identity(tokenizer, "")["fingerprint"],
        "text_field": text_field,
        "eval_fraction": eval_fraction,
        "version": VERSION,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def prepared(
    sources: Sequence[str],
    *,
    name: str,
    tokenizer: Any,
    cache: pathlib.Path,
    text_field: str,
    eval_fraction: float,
    progress: bool,
) -> pathlib.Path:
    """The store of ``sources`` in ``cache``, prepared by process 0 if it is missing or its
    inputs changed (prepare says "up to date" at once otherwise); every process waits for it.

    Raises:
        UsageError: bad sources, or a cache that the other processes cannot see.
    """
    from zoo_data import is_store, prepare_store

    key = _key(sources, tokenizer, text_field, eval_fraction)
    target = cache / f"{name}-{key[:16]}"
    if is_primary():
        try:
            prepare_store(
                list(sources),
                target,
                tokenizer=tokenizer,
                text_field=text_field,
                eval_fraction=eval_fraction,
                overwrite=True,  # the inputs changed since: this cache entry is theirs
                progress=progress,
            )
        except ValueError as e:
            raise UsageError.from_error(e) from None
    barrier(f"zoo-train: {target.name} prepared")
    if not is_store(target):
        raise UsageError(
            f"This process cannot see the data cache {str(cache)!r} that process 0 prepared; "
            "put --data-cache on a filesystem every host shares, or prepare the data with "
            "`zoo data prepare` on each host and pass the store."
        )
    return target


def slug(path: str) -> str:
    """A short name for a source in metrics and cache entries: its last path part."""
    name = pathlib.Path(path.rstrip("/")).name or "data"
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:40]


def training_stores(s: RunSettings, tokenizer: Any) -> list[tuple[str, pathlib.Path]]:
    """``(name, store)`` of each source of ``--data``: stores as they are; raw sources prepared
    into the cache, together (one source) unless ``--data-weights`` gives each its own share;
    the standard library's sources when ``--data`` is empty.

    Raises:
        UsageError: a weight count that does not match ``--data``.
    """
    from zoo_data import is_store, stdlib_files

    prepare = {
        "tokenizer": tokenizer,
        "cache": data_cache(s),
        "text_field": s.text_field,
        # With held-out data of its own, every document of the training data trains.
        "eval_fraction": 0.0 if s.eval_data else s.val_fraction,
        "progress": s.progress and is_terminal(),  # a log file gets no bar frames
    }
    if not s.data:
        files = [str(f) for f in stdlib_files(max_bytes=s.max_bytes, seed=s.seed)]
        return [("stdlib", prepared(files, name="stdlib", **prepare))]
    if s.data_weights and len(s.data_weights) != len(s.data):
        raise UsageError(
            f"--data-weights gives {len(s.data_weights)} weight(s) for {len(s.data)} --data "
            "source(s); give one weight per source."
        )
    stores = [(slug(p), pathlib.Path(p)) for p in s.data if is_store(p)]
    raw = [p for p in s.data if not is_store(p)]
    if s.data_weights:  # each source its own store, in the order given
        return [
            (slug(p), pathlib.Path(p) if is_store(p) else prepared([p], name=slug(p), **prepare))
            for p in s.data
        ]
    if raw:
        stores.append((slug(raw[0]), prepared(raw, name=slug(raw[0]), **prepare)))
    return stores


def eval_stores(s: RunSettings, tokenizer: Any) -> list[tuple[str, pathlib.Path]]:
    """``(name, store)`` of each source of ``--eval-data`` (evaluated whole); raw sources
    prepared with nothing held out."""
    from zoo_data import is_store

    out = []
    path: str | pathlib.Path  # a source, then the store prepared from it
    for path in s.eval_data:
        name = slug(path)
        if not is_store(path):
            path = prepared(
                [path],
                name=name,
                tokenizer=tokenizer,
                cache=data_cache(s),
                text_field=s.text_field,
                eval_fraction=0.0,
                progress=s.progress and is_terminal(),
            )
        out.append((name, pathlib.Path(path)))
    return out
