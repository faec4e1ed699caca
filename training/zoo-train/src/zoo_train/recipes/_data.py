"""The data of a run: its sources as token stores, read as training rows and held-out rows."""

from __future__ import annotations

import dataclasses
import glob
import os
import pathlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from .._usage import UsageError
from ..parallel import is_primary
from ..settings import RunSettings
from ._stores import data_cache, eval_stores, slug, training_stores


def check_data_paths(paths: list[str]) -> None:
    """Refuse empty or missing paths before anything heavy is imported."""
    for path in paths:
        if not path.strip():
            raise UsageError("--data got an empty path; pass a file, directory or glob with text.")
        if any(c in path for c in "*?["):
            if not glob.glob(path, recursive=True):
                raise UsageError(f"The data glob {path!r} matches no files; pass an existing path.")
        elif not os.path.exists(path):
            raise UsageError(
                f"The data path {path!r} does not exist; pass a file, directory or glob with text."
            )


@dataclasses.dataclass
class Data:
    """A run's training rows, its held-out rows by source (``None``: none), and a description
    for the start line (``headline``: what the steps are, when not rows of tokens)."""

    train: Any
    val: Mapping[str, Any] | None
    described: str
    headline: str | None = None
    closers: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def __enter__(self) -> Data:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close every store's files, and whatever else the data holds open (``closers``)."""
        close = getattr(self.train, "close", None)
        if close is not None:
            close()
        for part in (self.val or {}).values():
            part.close()
        for closer in self.closers:
            closer()

    @property
    def tokens_per_epoch(self) -> int:
        """Training tokens in one pass over every source."""
        return sum(self.train.rows_per_epoch) * self.train.seq_len


def _unique(names: list[str]) -> list[str]:
    """``names`` with repeats numbered (``data``, ``data-2``): the sources' names in metrics."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def _describe(
    sources: list[tuple[str, pathlib.Path]], stores: list[Any], cache: pathlib.Path
) -> str:
    """Each source with its documents and what of it is held out, e.g. ``corpus/ (120
    documents; held out: 6, 4.8% of the tokens)``: raw data by the paths the user gave, not
    by its store in the data ``cache``."""
    parts = []
    for (name, path), store in zip(sources, stores, strict=True):
        train, held = store.manifest["splits"]["train"], store.manifest["splits"]["eval"]
        docs = train["documents"] + held["documents"]
        what = str(path)
        if name == "stdlib":
            what = "the Python standard library"
        elif path.absolute().parent == cache.absolute():
            what = ", ".join(source["source"] for source in store.manifest["sources"])
        share = held["tokens"] / max(train["tokens"] + held["tokens"], 1)
        out = (
            f"held out: {held['documents']:,}, {share:.1%} of the tokens"
            if held["tokens"]
            else "none held out"
        )
        parts.append(f"{what} ({docs:,} document{'s' if docs != 1 else ''}; {out})")
    return ", ".join(parts)


def build_data(s: RunSettings, tokenizer: Any) -> Data:
    """The training and held-out rows of the settings' data (``data``, ``data_weights``,
    ``eval_data``, the split), every source a token store made with ``tokenizer``.

    Raises:
        UsageError: a store of another tokenizer, too little data for one row, bad weights.
    """
    from zoo_data import HeldOut, StoreLoader, TokenStore

    sources = training_stores(s, tokenizer)
    val: dict[str, HeldOut] | None
    try:
        stores = [TokenStore(path, tokenizer=tokenizer) for _, path in sources]
        # Without weights, each source in proportion to its size: as if they were one corpus.
        weights = s.data_weights or [max(st.split("train").num_tokens, 1) for st in stores]
        train = StoreLoader(
            stores,
            seq_len=s.seq_len,
            weights=weights,
            seed=s.seed,
            tokenizer=tokenizer,
            names=_unique([name for name, _ in sources]),
        )
        described = _describe(sources, stores, data_cache(s))
        if s.eval_data:
            held = eval_stores(s, tokenizer)
            val = {
                name: HeldOut(
                    TokenStore(path, tokenizer=tokenizer), s.seq_len, splits=("train", "eval")
                )
                for name, path in zip(
                    _unique([n for n, _ in held]), [p for _, p in held], strict=True
                )
            }
            described += f", evaluated on {', '.join(s.eval_data)}"
        else:
            val = train.held_out()
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if not val:
        val = None
        if (s.val_fraction > 0 or s.eval_data) and is_primary():
            print(
                "zoo: too little held-out text for evaluation; training without it.",
                file=sys.stderr,
            )
    return Data(train, val, described)


def eval_sources(
    paths: list[str],
    tokenizer: Any,
    *,
    cache: pathlib.Path,
    seq_len: int,
    text_field: str,
    max_bytes: int,
    seed: int,
    val_fraction: float | None,
) -> tuple[dict[str, Any], str]:
    """What ``zoo eval`` evaluates, by source, and its description: ``paths`` whole (stores as
    they are, raw data prepared into ``cache``), or only their held-out split with
    ``val_fraction``; without ``paths``, the held-out split of the standard library corpus
    that ``zoo train`` evaluates on.

    Raises:
        UsageError: a held-out split too small to evaluate.
    """
    from zoo_data import HeldOut, TokenStore, is_store, stdlib_files

    from ._stores import prepared

    whole = bool(paths) and val_fraction is None
    fraction = 0.0 if whole else (0.05 if val_fraction is None else val_fraction)
    prepare = {
        "tokenizer": tokenizer,
        "cache": cache,
        "text_field": text_field,
        "eval_fraction": fraction,
        "progress": False,
    }
    if paths:
        named = [
            (name, pathlib.Path(p) if is_store(p) else prepared([p], name=name, **prepare))
            for name, p in zip(_unique([slug(p) for p in paths]), paths, strict=True)
        ]
        described = ", ".join(paths)
    else:
        files = [str(f) for f in stdlib_files(max_bytes=max_bytes, seed=seed)]
        named = [("stdlib", prepared(files, name="stdlib", **prepare))]
        described = f"the Python standard library ({len(files)} files)"
    splits = ("train", "eval") if whole else ("eval",)
    try:
        sources = {
            name: HeldOut(TokenStore(path, tokenizer=tokenizer), seq_len, splits=splits)
            for name, path in named
        }
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if not any(part.rows for part in sources.values()):
        raise UsageError(
            "The held-out split is too small to evaluate; pass --data or raise --val-fraction."
        )
    return sources, described
