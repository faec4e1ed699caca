"""Worker for the token-store benchmark (``python -m bench.data_worker '{}'``).

Requests (``{"op": name, ...keyword arguments}``), each answered with one JSON object:
``tokenizer`` (train the BPE), ``corpus`` (write synthetic JSON lines), ``baseline``
(``encode_batch_fast``), ``prepare``, ``loader``, ``verify``, ``boundary``, ``processes``,
``libraries``.
The parent (``bench/data.py``) starts a fresh worker for every measurement, so each peak RSS is
that measurement's own.
"""

from __future__ import annotations

import json
import os
import pathlib
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .harness import serve

SEQ, BATCH = 1024, 16
WARMUP, TIMED = 50, 2000  # batches of the loader measurement: untimed, then timed (twice)


def _words(seed: int = 0, count: int = 20000) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    probs = 1.0 / np.arange(1, 27)
    probs /= probs.sum()
    return ["".join(rng.choice(letters, int(rng.integers(1, 10)), p=probs)) for _ in range(count)]


def _text(rng: np.random.Generator, words: list[str], n_words: int) -> str:
    ranks = np.minimum(rng.zipf(1.2, n_words), len(words)) - 1
    out = [words[r] for r in ranks]
    for i in range(0, n_words, 12):
        out[i] = out[i] + (".\n" if i % 120 == 0 else ",")
    return " ".join(out)


def tokenizer(root: str) -> dict[str, Any]:
    """A byte-level BPE of 8192 tokens trained on the synthetic text, EOS ``</s>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    words = _words()
    rng = np.random.default_rng(1)
    sample = [_text(rng, words, 2000) for _ in range(300)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8192,
        special_tokens=["</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(sample, trainer)
    path = pathlib.Path(root) / "tok"
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    return {"path": str(path)}


def corpus(directory: str, megabytes: float) -> dict[str, Any]:
    """``megabytes`` MB of JSON lines (documents of 1-16 KB) in files of about 8 MB: 16 distinct
    files written once each, copied under new names for the rest, the last cut at a line so the
    total is ``megabytes`` to within a document."""
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    words = _words()
    target = int(megabytes * 1e6)
    written, n = 0, 0
    blocks: list[bytes] = []
    rng = np.random.default_rng(2)
    while written < target:
        if len(blocks) < 16:
            lines, size = [], 0
            while size < min(8e6, target):
                line = json.dumps({"text": _text(rng, words, int(rng.integers(200, 3000)))}) + "\n"
                lines.append(line)
                size += len(line)
            blocks.append("".join(lines).encode())
        block = blocks[n % len(blocks)]
        if written + len(block) > target:
            block = block[: block.find(b"\n", target - written) + 1] or block
        (out / f"part{n:05d}.jsonl").write_bytes(block)
        written += len(block)
        n += 1
    return {"path": str(out), "bytes": written, "files": n}


def _peak_rss_mib() -> float:
    """This process's peak RSS (``VmHWM``). Not ``ru_maxrss``: Linux keeps it across ``exec``,
    so a worker would report the parent's size at the fork when that was larger."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _size_mib(directory: str) -> float:
    return sum(p.stat().st_size for p in pathlib.Path(directory).rglob("*") if p.is_file()) / 2**20


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (load on the machine aside)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _texts(directory: str) -> list[str]:
    texts = []
    for path in sorted(pathlib.Path(directory).glob("*.jsonl")):
        texts += [json.loads(line)["text"] for line in path.read_text().splitlines()]
    return texts


def baseline(directory: str, tok_dir: str, threads: int) -> dict[str, Any]:
    """``encode_batch_fast`` over the corpus's texts (already in memory), 1 MiB batches, on
    ``RAYON_NUM_THREADS`` threads (set by the parent)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(f"{tok_dir}/tokenizer.json")
    texts = _texts(directory)
    nbytes = sum(len(t.encode()) for t in texts)
    batches, current, size = [], [], 0
    for t in texts:
        current.append(t)
        size += len(t)
        if size >= 1 << 20:
            batches.append(current)
            current, size = [], 0
    batches.append(current)
    tok.encode_batch_fast(batches[0][:10])  # start the thread pool
    cpu, start = _cpu_s(), time.perf_counter()
    tokens = sum(
        len(e.ids) for b in batches for e in tok.encode_batch_fast(b, add_special_tokens=False)
    )
    seconds, cpu = time.perf_counter() - start, _cpu_s() - cpu
    return {
        "mb_per_s": nbytes / seconds / 1e6,
        "mb_per_cpu_s": nbytes / cpu / 1e6,
        "tokens_per_s": tokens / seconds,
        "threads": threads,
    }


def prepare(directory: str, tok_dir: str, workers: int, out: str) -> dict[str, Any]:
    """``prepare_store`` from scratch: rate, and the peak RSS of the main process and of the
    largest worker (``tok_dir`` "bytes": the byte tokenizer)."""
    import shutil

    from zoo_train.data import prepare_store

    shutil.rmtree(out, ignore_errors=True)
    nbytes = sum(p.stat().st_size for p in pathlib.Path(directory).glob("*.jsonl"))
    start_rss = _peak_rss_mib()
    cpu, start = _cpu_s(), time.perf_counter()
    tokenizer = None if tok_dir == "bytes" else tok_dir
    info = prepare_store([directory], out, tokenizer=tokenizer, workers=workers, progress=False)
    seconds, cpu = time.perf_counter() - start, _cpu_s() - cpu
    return {
        "mb_per_cpu_s": nbytes / cpu / 1e6,
        "workers": workers,
        "mb": nbytes / 1e6,
        "seconds": seconds,
        "mb_per_s": nbytes / seconds / 1e6,
        "tokens_per_s": info["tokens"] / seconds,
        "tokens": info["tokens"],
        "store_mib": _size_mib(out),
        "rss_at_start_mib": start_rss,
        "peak_rss_main_mib": _peak_rss_mib(),
        "peak_rss_worker_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _timed_batches(loader: Any, steps: int, rows: tuple[int, int] | None = None) -> np.ndarray:
    times = np.empty(steps)
    for i in range(steps):
        t = time.perf_counter()
        loader.next_batch(BATCH, rows=rows)
        times[i] = time.perf_counter() - t
    return times


def loader(store: str, check_blocks: bool = True) -> dict[str, Any]:
    """Time from opening the store to the first batch, host time of ``next_batch(16)`` at
    ``seq_len`` 1024 (whole batches, then a process's 8 rows of each), and the peak RSS; with
    ``check_blocks``, each block checked against its hash when first read (as training does)."""
    from zoo_train.data import StoreLoader, TokenStore

    imported_rss = _peak_rss_mib()
    start = time.perf_counter()
    data = StoreLoader(TokenStore(store, check_blocks=check_blocks), seq_len=SEQ, seed=0)
    open_s = time.perf_counter() - start
    data.next_batch(BATCH)
    first_batch_s = time.perf_counter() - start
    _timed_batches(data, WARMUP)
    times = _timed_batches(data, TIMED)
    half = _timed_batches(data, TIMED, rows=(0, BATCH // 2))
    return {
        "store_mib": _size_mib(store),
        "open_s": open_s,
        "first_batch_s": first_batch_s,
        "median_us": float(np.median(times) * 1e6),
        "p99_us": float(np.percentile(times, 99) * 1e6),
        "half_median_us": float(np.median(half) * 1e6),
        "batches": 1 + WARMUP + 2 * TIMED,
        "rss_imported_mib": imported_rss,
        "rss_mib": _peak_rss_mib(),
    }


def verify(store: str) -> dict[str, Any]:
    """``zoo data verify``'s check of every block on every core: GB/s (the store was just
    written, so mostly from the page cache), and once more on one thread."""
    from zoo_train.data.store import verify_store

    out: dict[str, Any] = {"cores": os.cpu_count()}
    for name, workers in (("all", None), ("one", 1)):
        report = verify_store(store, workers=workers, progress=False)
        assert not report.damaged, report.damaged
        out[f"{name}_gb_per_s"] = report.bytes / report.seconds / 1e9
        out["bytes"], out["blocks"] = report.bytes, report.blocks
    return out


def boundary(store: str) -> dict[str, Any]:
    """Batch times over three epochs of a small store: the slowest batch holding an epoch
    boundary against the median."""
    from zoo_train.data import StoreLoader

    data = StoreLoader(store, seq_len=SEQ, seed=0)
    rows = data.rows_per_epoch[0]
    steps = 3 * rows // BATCH + 2
    _timed_batches(data, 20)
    data.load_state_dict({"row": 0})
    times = _timed_batches(data, steps)
    # Batches holding an epoch's first row (and the one before, which ends the epoch).
    firsts = [
        s for s in range(steps) if any(s * BATCH <= e * rows < (s + 1) * BATCH for e in (1, 2, 3))
    ]
    crossing = sorted({c for s in firsts for c in (s - 1, s)})

    # On a shared machine a single pass's slowest batch is whichever one the scheduler paused;
    # the cost that belongs to a batch is its median over repeats.
    def repeated(step: int) -> float:
        samples = []
        for _ in range(21):
            t = time.perf_counter()
            data.batch(step, BATCH)
            samples.append(time.perf_counter() - t)
        return float(np.median(samples))

    others = [s for s in range(0, steps, max(steps // 40, 1)) if s not in crossing]
    typical = float(np.median([repeated(s) for s in others]))
    at_boundary = max(repeated(s) for s in crossing)
    return {
        "rows_per_epoch": rows,
        "single_pass_median_us": float(np.median(times) * 1e6),
        "single_pass_slowest_at_boundary_us": float(max(times[crossing]) * 1e6),
        "single_pass_slowest_overall_us": float(times.max() * 1e6),
        "repeated_median_us": typical * 1e6,
        "repeated_slowest_at_boundary_us": at_boundary * 1e6,
        "ratio": at_boundary / typical,
    }


def _bytes_read() -> int | None:
    """Bytes this process has read by ``read``/``pread`` so far (Linux ``rchar``), reading
    ``/proc/self/io`` itself included."""
    try:
        lines = pathlib.Path("/proc/self/io").read_text().splitlines()
    except OSError:
        return None
    return next(int(line.split()[1]) for line in lines if line.startswith("rchar:"))


def _read_by(fn: Any) -> tuple[Any, int]:
    """``fn()`` and the bytes it read (0 where the count is not available)."""
    before = _bytes_read() or 0
    probe = (_bytes_read() or 0) - before  # what one look at the count itself reads
    out = fn()
    return out, (_bytes_read() or 0) - before - 2 * probe


def processes(store: str, batches: int = 200) -> dict[str, Any]:
    """What each of 2 processes reads of every global batch of 16: rows, tokens, and bytes read
    from the store's files; and that together they are the 1-process batches.

    The two loaders live in this one process, called with the rows each process would ask for,
    one after the other, so the bytes read between calls are each loader's own.
    """
    from zoo_train.data import StoreLoader

    whole = StoreLoader(store, seq_len=SEQ, seed=0)
    parts = [StoreLoader(store, seq_len=SEQ, seed=0) for _ in range(2)]
    tokens = [[0] * batches for _ in parts]
    rows = [[0] * batches for _ in parts]
    counted = _bytes_read() is not None
    io = [0, 0, 0]  # process 0, process 1, one process reading whole batches
    same = True
    for b in range(batches):
        full, n = _read_by(lambda: whole.next_batch(BATCH))
        io[2] += n
        got = []
        for i, part in enumerate(parts):
            half, n = _read_by(
                lambda i=i, part=part: part.next_batch(BATCH, rows=(8 * i, 8 * i + 8))
            )
            got.append(half)
            io[i] += n
            tokens[i][b] = int(got[i]["input_ids"].size)
            rows[i][b] = int(got[i]["input_ids"].shape[0])
        same &= all(np.array_equal(full[k], np.concatenate([g[k] for g in got])) for k in full)
    return {
        "batches": batches,
        "global_tokens_per_batch": BATCH * SEQ,
        "rows_per_batch": [[min(r), max(r)] for r in rows],
        "tokens_per_batch": [[min(t), max(t)] for t in tokens],
        "tokens_read": [sum(t) for t in tokens],
        "row_bytes": (SEQ + 1) * whole.stores[0].split("train").dtype.itemsize,
        "bytes_read": io[:2] if counted else None,
        "bytes_read_one_process": io[2] if counted else None,
        "same_batches": bool(same),
    }


def _median_us(fn: Any, picks: list[np.ndarray]) -> float:
    """Median microseconds of ``fn(pick)`` over ``picks`` (after 10 untimed calls)."""
    for pick in picks[:10]:
        fn(pick)
    times = []
    for pick in picks:
        t = time.perf_counter()
        fn(pick)
        times.append(time.perf_counter() - t)
    return float(np.median(times) * 1e6)


def libraries(store: str, scratch: str) -> dict[str, Any]:
    """Median time to read 16 random rows of 1025 tokens out of the store's first 20M tokens,
    per storage library (a cell names a library that is not installed)."""
    from zoo_train.data import TokenStore

    split = TokenStore(store).split("train")
    tokens = split.span(0, min(20_000_000, split.offsets[1]))[0]
    n, dtype = len(tokens), tokens.dtype
    root = pathlib.Path(scratch)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    starts = [rng.integers(0, n - SEQ - 1, BATCH) for _ in range(300)]
    out: dict[str, Any] = {"tokens": n}
    timed = lambda fn: _median_us(fn, starts)

    np.save(root / "tokens.npy", tokens)
    mm = np.load(root / "tokens.npy", mmap_mode="r")
    out["numpy_memmap_us"] = timed(lambda s: np.stack([mm[a : a + SEQ + 1] for a in s]))
    widths = np.full(BATCH, SEQ + 1)
    out["store_batch_us"] = timed(lambda s: split.read(s.astype(np.int64), widths, SEQ + 1, 0))
    try:
        import tensorstore as ts

        spec = {
            "driver": "zarr",
            "kvstore": {"driver": "file", "path": str(root / "ts")},
            "metadata": {"shape": [n], "chunks": [1 << 16], "dtype": dtype.str},
            "create": True,
            "delete_existing": True,
        }
        arr = ts.open(spec).result()
        arr.write(tokens).result()
        arr = ts.open(
            {k: v for k, v in spec.items() if k not in ("create", "delete_existing", "metadata")}
        ).result()

        def ts_read(s: np.ndarray) -> np.ndarray:
            futures = [arr[int(a) : int(a) + SEQ + 1].read() for a in s]
            return np.stack([f.result() for f in futures])

        out["tensorstore_us"] = timed(ts_read)
    except ImportError as e:  # pragma: no cover
        out["tensorstore_us"] = f"not installed ({e})"
    try:
        import grain
        from array_record.python.array_record_data_source import ArrayRecordDataSource
        from array_record.python.array_record_module import ArrayRecordWriter

        rows = (n - 1) // SEQ
        path = str(root / "rows.array_record")
        writer = ArrayRecordWriter(path, "group_size:1")
        for r in range(rows):
            writer.write(tokens[r * SEQ : r * SEQ + SEQ + 1].tobytes())
        writer.close()
        source = ArrayRecordDataSource([path])
        picks = [rng.integers(0, rows, BATCH) for _ in range(300)]  # row indices this time
        out["array_record_us"] = _median_us(
            lambda s: np.stack([np.frombuffer(source[int(i)], dtype) for i in s]), picks
        )
        ds = (
            grain.MapDataset.source(source)
            .shuffle(seed=0)
            .map(lambda b: np.frombuffer(b, dtype))
            .batch(BATCH)
        )
        out["grain_array_record_us"] = _median_us(lambda s: ds[int(s[0]) % len(ds)], picks)
    except ImportError as e:
        out["array_record_us"] = out["grain_array_record_us"] = f"not installed ({e.name})"
    return out


OPS = {
    f.__name__: f
    for f in (tokenizer, corpus, baseline, prepare, loader, boundary, processes, libraries)
}


def _handler(fn: Callable[..., dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``fn`` called with a request's arguments (all but its ``op``)."""

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        return fn(**{k: v for k, v in request.items() if k != "op"})

    return handle


def main() -> None:
    """Serve requests: each names an op and its keyword arguments."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    handlers = {name: _handler(fn) for name, fn in OPS.items()}
    serve(handlers, {"config": json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}})


if __name__ == "__main__":
    main()
