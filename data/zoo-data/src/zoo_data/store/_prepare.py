"""``prepare``: tokenize sources once into a token store, in parallel, streaming, resumably.

Documents are read in order and cut into chunks of about :data:`CHUNK_CHARS` characters; worker
processes tokenize chunks while the main process reads ahead (at most two chunks per worker in
flight) and appends the results, in chunk order, to the current shard. A shard closes after
about :data:`SHARD_CHARS` characters of input, at a chunk boundary: where chunks and shards end
depends on the input alone, so the store is byte-identical whatever the number of workers.

Everything is written into ``.NAME.partial`` beside the store. Each closed shard is synced,
renamed into place and recorded in ``progress.json``; an interrupted prepare keeps those, and a
rerun with the same settings checks them and continues after the last. The finished directory
is renamed into place in one step, so a store that exists is complete.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import pathlib
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .._documents import Document
from .._output_paths import check_output_path
from .._tokenizer import Tokenizer
from ..inputs import PIECE_CHARS, DocumentStream
from ._format import (
    MANIFEST,
    PAIRS_VERSION,
    SPLITS,
    VERSION,
    token_dtype,
    write_json,
)
from ._identity import TOKENIZER_DIR, load_tokenizer, save_tokenizer, tokenizer_identity
from ._info import store_info
from ._manifest import make_manifest, read_manifest
from ._partial import PROGRESS, clear, discard, locked, missing, publish, read_progress
from ._shards import ShardWriter
from ._tokenize import Encoded, Encoder
from ._verify import check_store, shard_problems

CHUNK_CHARS = 1 << 20
CHUNK_DOCS = 8192
SHARD_CHARS = 64 << 20


def _source_records(stream: DocumentStream) -> list[dict[str, Any]]:
    """Per source: its files, their bytes and a fingerprint of their names, sizes and times."""
    out = []
    for source in stream.sources:
        files = [
            (f, s) for f, s in zip(stream.files, stream.sizes, strict=True) if f.source == source
        ]
        listing = [[f.name, size, f.path.stat().st_mtime_ns] for f, size in files]
        out.append(
            {
                "source": source,
                "files": len(files),
                "bytes": sum(s for _, s in files),
                "fingerprint": hashlib.sha256(json.dumps(listing).encode()).hexdigest(),
            }
        )
    return out


def _settings(identity: dict[str, Any], text_field: str, eval_fraction: float) -> dict[str, Any]:
    return {
        "text_field": text_field,
        "eval_fraction": eval_fraction,
        "split_seed": 0,
        # a document the hash holds out trains instead where it would push the held-out
        # split past eval_fraction of the tokens so far
        "split_rule": "hash, capped by tokens; few text files whole, within the share",
        "chunk_chars": CHUNK_CHARS,
        "chunk_docs": CHUNK_DOCS,
        "shard_chars": SHARD_CHARS,
        "piece_chars": PIECE_CHARS,
        "tokenizer": identity["fingerprint"],
    }


def _same(manifest: dict[str, Any], settings: dict[str, Any], sources: list[dict]) -> list[str]:
    """What differs between an existing store and this prepare (empty: nothing)."""
    old = manifest.get("settings", {})
    diff = [k for k in settings if old.get(k) != settings[k]]
    if manifest.get("version") not in (VERSION, PAIRS_VERSION):
        diff.append("format version")
    if manifest.get("sources") != sources:
        diff.append("inputs")
    return diff


def _chunks(docs: Iterator[Document], stream: DocumentStream) -> Iterator[tuple[list, int, int]]:
    """``(documents, characters, bytes read so far)`` per chunk."""
    chunk: list[Document] = []
    chars = 0
    for doc in docs:
        chunk.append(doc)
        chars += len(doc.text)
        if chars >= CHUNK_CHARS or len(chunk) >= CHUNK_DOCS:
            yield chunk, chars, stream.bytes_read
            chunk, chars = [], 0
    if chunk:
        yield chunk, chars, stream.bytes_read


_WORKER: Encoder | None = None


def _init_worker(encoder: Encoder) -> None:
    global _WORKER
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread per worker process
    # Ctrl-C is the main process's to handle: it stops the pool and keeps the finished shards.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER = encoder


def _encode_in_worker(chunk: list[Document]) -> Encoded:
    assert _WORKER is not None
    return _WORKER(chunk)


class _Run:
    """One prepare into a partial directory: groups of shards, progress, the progress bar."""

    def __init__(
        self, partial: pathlib.Path, settings: dict[str, Any], bar: Any, total_bytes: int
    ) -> None:
        self.partial = partial
        self.total_bytes = total_bytes
        self.settings = settings
        self.groups: list[dict[str, Any]] = []
        self.bar = bar
        self.tokens = 0
        self.split_tokens = dict.fromkeys(SPLITS, 0)
        self.started = time.perf_counter()
        self._open()

    def resume(self, groups: list[dict[str, Any]]) -> int:
        """Keep the finished groups whose files check out; how many chunks they hold."""
        for group in groups:
            if shard_problems(self.partial, group["shards"], checksum=True):
                break
            self.groups.append(group)
            for shard in group["shards"]:
                self.split_tokens[shard["split"]] += shard["tokens"]
        self.abort()
        self._open()
        return sum(g["chunks"] for g in self.groups)

    def _capped(self, encoded: Encoded, read: int) -> np.ndarray:
        """The documents held out: those the hash chose, as long as the held-out split stays
        within ``eval_fraction`` of the corpus's tokens (a large document the hash chose trains
        instead); a side chosen before (the files of a corpus of too few) is kept. The corpus's tokens are
        estimated from its size on disk and the tokens per byte read so far. Decided here, in
        document order, so the split is the same whatever the number of workers."""
        so_far = self.split_tokens["train"] + self.split_tokens["eval"] + len(encoded.tokens)
        corpus = max(so_far, so_far * self.total_bytes / max(read, 1))
        limit = self.settings["eval_fraction"] * corpus
        out = np.zeros_like(encoded.held_out)
        held_out, chosen, lengths = (
            a.tolist() for a in (encoded.held_out, encoded.chosen, encoded.lengths)
        )
        for i, (held, fixed, n) in enumerate(zip(held_out, chosen, lengths, strict=True)):
            out[i] = held and (fixed or self.split_tokens["eval"] + n <= limit)
            self.split_tokens["eval" if out[i] else "train"] += n
        return out

    def _open(self) -> None:
        index = len(self.groups)
        self.writers = {s: ShardWriter(self.partial, s, index) for s in SPLITS}
        self.chunks = 0
        self.chars = 0

    def add(self, encoded: Encoded, chars: int, read: int) -> None:
        held = self._capped(encoded, read)
        ends = encoded.lengths.cumsum()
        starts = ends - encoded.lengths
        for split, take in zip(SPLITS, (~held, held), strict=True):
            if not take.any():
                continue
            pieces = [slice(int(a), int(b)) for a, b in zip(starts[take], ends[take], strict=True)]
            tokens = encoded.tokens if take.all() else _gather(encoded.tokens, pieces)
            mask = encoded.mask
            if mask is not None and not take.all():
                mask = _gather(mask, pieces)
            n_examples = int(encoded.examples[take].sum())
            pairs = None if encoded.pairs is None else encoded.pairs[take]
            origins = [o for o, t in zip(encoded.origins, take.tolist(), strict=False) if t]
            self.writers[split].append(
                tokens, encoded.lengths[take], mask, n_examples, pairs, origins
            )
        self.tokens += len(encoded.tokens)
        self.chunks += 1
        self.chars += chars
        if self.chars >= SHARD_CHARS:
            self.close()
        self.bar.update(max(read - self.bar.n, 0))
        rate = self.tokens / max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix_str(f"{rate / 1e6:.2f}M tok/s", refresh=False)

    def close(self) -> None:
        """Finish the current group of shards and record it."""
        if not self.chunks:
            return
        shards = [self.writers[s].finish() for s in SPLITS]
        self.groups.append({"chunks": self.chunks, "shards": shards})
        write_json(self.partial / PROGRESS, {"settings": self.settings, "groups": self.groups})
        self._open()

    def abort(self) -> None:
        for writer in self.writers.values():
            writer.abort()


def _gather(array: Any, pieces: list[slice]) -> Any:
    return np.concatenate([array[p] for p in pieces])


def _jax_running() -> bool:
    """Whether this process has started JAX's runtime (its threads make a fork unsafe)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
    except ImportError:  # pragma: no cover - another jax layout: assume the worst
        return True
    return bool(getattr(xla_bridge, "backends_are_initialized", lambda: True)())


def _paths(sources: list[Any]) -> list[str]:
    """The sources that name a path (a glob names the files it matches instead)."""
    return [os.fspath(s) for s in sources if not any(c in os.fspath(s) for c in "*?[")]


def _tokenizer_path(tokenizer: Any) -> str | None:
    """The path a tokenizer argument names, if it names one."""
    return os.fspath(tokenizer) if isinstance(tokenizer, str | os.PathLike) else None


def _pool(workers: int, encoder: Encoder) -> concurrent.futures.ProcessPoolExecutor:
    # fork: workers start at once with the tokenizer already loaded (nothing is re-imported);
    # inside a process where JAX runs (a training run preparing its data), forkserver instead.
    methods = multiprocessing.get_all_start_methods()
    method = "fork" if "fork" in methods and not _jax_running() else "spawn"
    if method == "spawn" and "forkserver" in methods:
        method = "forkserver"
    context = multiprocessing.get_context(method)
    return concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(encoder,)
    )


def prepare_store(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str] | Tokenizer | None = None,
    text_field: str = "text",
    workers: int | None = None,
    eval_fraction: float = 0.05,
    overwrite: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Tokenize ``sources`` once into a token store at ``out``.

    Args:
        sources: files, directories, globs: text, ``.jsonl``/``.ndjson`` (plain, ``.gz``,
            ``.zst``; plain text, ``messages`` chat or ``prompt``/``completion`` records),
            Parquet, Arrow, ``datasets.save_to_disk`` directories.
        out: the store directory to write.
        tokenizer: a ``tokenizer.json`` or a Hugging Face directory, a tokenizer object, or
            ``None`` for the byte tokenizer.
        text_field: the field or column that holds a plain record's text.
        workers: tokenizing processes (default: every core).
        eval_fraction: the share of documents held out, chosen by a stable hash of each
            document's id; never more than this share of the tokens (a large document the
            hash chose trains instead). Text files too few to split by document (fewer than
            ``2 / eval_fraction``) are held out whole where that share allows, never cut.
        overwrite: replace a store made with other settings or inputs.
        progress: show a progress bar (MB/s, tokens/s, ETA) on stderr.

    Returns:
        :func:`store_info` of the store, plus ``"status"``: ``"prepared"``, ``"resumed"`` or
        ``"up to date"`` (a store of the same settings and inputs already there: nothing done).

    Raises:
        ValueError: bad sources (see :class:`~zoo_data.inputs.DocumentStream`), an
            existing store of other settings without ``overwrite``, no documents at all, an
            ``out`` that is, holds or lies inside a source (or the tokenizer), or is the
            filesystem root or a system directory (see :func:`~zoo_data.check_output_path`).
    """
    if not 0.0 <= eval_fraction < 1.0:
        raise ValueError(f"The eval fraction must be in [0, 1), got {eval_fraction}.")
    workers = (os.cpu_count() or 1) if workers is None else workers
    if workers < 1:
        raise ValueError(f"The number of workers must be at least 1, got {workers}.")
    out = pathlib.Path(out)
    named = _paths([sources] if isinstance(sources, str | os.PathLike) else list(sources))
    # The sources named and the tokenizer, then each file a glob found: never over, around or
    # inside what is read (the store itself is never read back in).
    check_output_path(out, [*named, _tokenizer_path(tokenizer)], kind=None)
    named_out = pathlib.Path(os.path.abspath(out))  # `.` has no name of its own
    partial = named_out.with_name(f".{named_out.name}.partial")
    tok, description = load_tokenizer(tokenizer)
    identity = tokenizer_identity(tok, description)
    # A file at `out` is not excluded: a glob that matches it is refused below.
    excluded = [partial] if out.is_file() else [out, partial]
    stream = DocumentStream(
        sources, text_field=text_field, line_split=(eval_fraction, 0), exclude=excluded
    )
    check_output_path(out, [f.path for f in stream.files if f.source not in named])
    settings = _settings(identity, text_field, eval_fraction)
    source_records = _source_records(stream)
    if (out / MANIFEST).is_file():
        try:
            diff = _same(read_manifest(out), settings, source_records)
        except ValueError:  # a damaged manifest: replaced on request, else said
            if not overwrite:
                raise
            diff = ["manifest"]
        if not diff:
            try:
                check_store(out, checksums=False)
                return {**store_info(out), "status": "up to date"}
            except ValueError:
                if not overwrite:
                    raise
        elif not overwrite:
            raise ValueError(
                f"{str(out)!r} is a token store made with other {', '.join(diff)}; pass "
                "--overwrite (overwrite=True) to replace it, or choose another --out."
            )
    elif out.exists() and (out.is_file() or any(out.iterdir())) and not overwrite:
        raise ValueError(
            f"{str(out)!r} exists and is not a token store; choose another --out or pass "
            "--overwrite to replace it."
        )
    made = missing(partial.parent)
    with locked(partial, out):
        try:
            status = _write(
                stream, partial, settings, tok, identity, source_records, workers, progress
            )
        except BaseException:
            discard(partial, made)
            raise
        publish(partial, named_out)
    return {**store_info(out), "status": status}


def _write(
    stream: DocumentStream,
    partial: pathlib.Path,
    settings: dict[str, Any],
    tok: Tokenizer,
    identity: dict[str, Any],
    source_records: list[dict[str, Any]],
    workers: int,
    progress: bool,
) -> str:
    from tqdm.auto import tqdm

    dtype = token_dtype(identity["vocab_size"])
    encoder = Encoder(tok, dtype, eval_fraction=settings["eval_fraction"])
    run_settings = {**settings, "sources": source_records}
    saved = read_progress(partial)
    bar = tqdm(
        total=stream.total_bytes,
        unit="B",
        unit_scale=True,
        desc="prepare",
        disable=not progress,
        dynamic_ncols=True,
        delay=2.0,  # only for work long enough to watch
    )
    with bar:
        resuming = saved is not None and saved.get("settings") == run_settings
        if not resuming:
            clear(partial)
        run = _Run(partial, run_settings, bar, stream.total_bytes)
        done = run.resume(saved["groups"]) if resuming and saved is not None else 0
        status = "resumed" if done else "prepared"
        pool = _pool(workers, encoder) if workers > 1 else None
        try:
            pending: collections.deque = collections.deque()
            for number, (chunk, chars, read) in enumerate(_chunks(iter(stream), stream)):
                if number < done:
                    bar.update(max(read - bar.n, 0))
                    continue
                if pool is None:
                    run.add(encoder(chunk), chars, read)
                    continue
                pending.append((pool.submit(_encode_in_worker, chunk), chars, read))
                while len(pending) > 2 * workers:
                    future, c, r = pending.popleft()
                    run.add(future.result(), c, r)
            while pending:
                future, c, r = pending.popleft()
                run.add(future.result(), c, r)
            run.close()
        except BaseException:
            run.abort()
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
    shards = [s for g in run.groups for s in g["shards"] if s["files"]]
    if not shards:
        raise ValueError(f"No non-empty documents found in {stream.sources!r}.")
    manifest = make_manifest(settings, identity, dtype, source_records, stream, shards)
    save_tokenizer(tok, partial / TOKENIZER_DIR)
    write_json(partial / MANIFEST, manifest)
    return status
