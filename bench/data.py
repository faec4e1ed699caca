"""Token store benchmark ("data"): what the data path costs, with no training at all.

- ``prepare_store`` with a BPE tokenizer against ``tokenizers``' own ``encode_batch_fast`` over
  the same text with the same threads (``RAYON_NUM_THREADS``), side by side; 2 workers against 1;
- prepare's peak RSS (the main process and the largest worker) for a 100 MB and a 1 GB corpus
  (quick: 20 and 100 MB);
- ``StoreLoader``: time from opening a store to its first batch, host time per 16 x 1024 batch
  and the peak RSS after thousands of batches, a 10 MB store against the large one;
- the slowest batch across an epoch boundary against the median;
- rows, tokens and bytes each of 2 processes reads of every global batch;
- random reads of 16 rows of 1025 tokens from a NumPy memory-map, the store, tensorstore,
  ArrayRecord and Grain (``MapDataset`` with its index shuffle), where installed.

Every measurement runs in a fresh worker process (``bench.data_worker``), 3 times (quick: 2);
medians. Synthetic text (random words of a fixed vocabulary, JSON lines in files of ~8 MB) is
written under a temporary directory and deleted afterwards.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from typing import Any

from .harness import Worker, median, new_result, table, target

NAME = "data"
TITLE = "Token store: prepare rate and memory, loader, epoch boundaries, processes, storage"
SEQ, BATCH = 1024, 16
SIZES_MB = {  # the rate corpus, the two prepare-memory corpora, the small loader store
    False: {"rate": 40, "small": 100, "large": 1000, "tiny": 10},
    True: {"rate": 10, "small": 20, "large": 100, "tiny": 10},
}
PREPARE_VS_BASELINE = 0.8
TWO_WORKERS = 1.5
PREPARE_RSS_MIB = 1024
LOADER_RSS_WITHIN_MIB = 100
FIRST_BATCH_WITHIN = 0.10
BOUNDARY_RATIO = 2.0
BATCH_US = 100.0
LIBRARIES = {
    "numpy_memmap_us": "NumPy memory-map, 16 slices stacked (tokens only)",
    "store_batch_us": "the store (pread per row; segment ids, positions, loss mask)",
    "tensorstore_us": "tensorstore (zarr, 64 Ki-token chunks), 16 reads",
    "array_record_us": "ArrayRecord (rows cut when written), 16 records",
    "grain_array_record_us": "Grain MapDataset over that ArrayRecord source, shuffled, batched",
}


def _measure(op: str, env: dict[str, str] | None = None, **kwargs: Any) -> dict[str, Any]:
    """One measurement in a fresh worker process (its peak RSS is the measurement's own)."""
    with Worker("bench.data_worker", {}, env=env) as worker:
        return worker.ask(op, **kwargs)


def _log(text: str) -> None:
    print(f"[data] {text}", file=sys.stderr, flush=True)


def _rates(data: dict[str, Any], corpus: str, root: str, tok: str) -> None:
    data["rates"] = []
    for _ in range(data["repeats"]):
        for threads in (1, 2):
            env = {"RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
            base = _measure("baseline", env, directory=corpus, tok_dir=tok, threads=threads)
            data["rates"].append({"side": "baseline", "threads": threads, **base})
            prep = _measure(
                "prepare", env, directory=corpus, tok_dir=tok, workers=threads, out=f"{root}/s"
            )
            data["rates"].append({"side": "prepare", "threads": threads, **prep})
            _log(f"{threads} thread(s): {base['mb_per_s']:.2f} vs {prep['mb_per_s']:.2f} MB/s")


def run(quick: bool) -> dict[str, Any]:
    """Every measurement; a result dict (see :mod:`bench.harness`)."""
    sizes = SIZES_MB[quick]
    data: dict[str, Any] = {"sizes_mb": sizes, "repeats": 2 if quick else 3, "corpora": {}}
    root = tempfile.mkdtemp(prefix="zoo-bench-data-")
    corpora = {name: f"{root}/{name}" for name in ("rate", "small", "large", "tiny")}
    stores = {name: f"{root}/store-{name}" for name in ("small", "large", "tiny")}
    try:
        with Worker("bench.data_worker", {}) as setup:
            tok = setup.ask("tokenizer", root=root)["path"]
            for name, path in corpora.items():
                written = setup.ask("corpus", directory=path, megabytes=sizes[name])
                data["corpora"][name] = {k: written[k] for k in ("bytes", "files")}
        _log(f"corpora written under {root}")
        _rates(data, corpora["rate"], root, tok)
        data["prepare"] = {}
        for name in ("small", "large", "tiny"):
            data["prepare"][name] = _measure(
                "prepare", directory=corpora[name], tok_dir=tok, workers=2, out=stores[name]
            )
            shutil.rmtree(corpora[name])
            _log(f"prepared {sizes[name]} MB: {data['prepare'][name]['seconds']:.0f} s")
        data["loader"] = {"tiny": [], "large": []}
        data["unchecked"] = {"tiny": [], "large": []}  # blocks not checked against their hashes
        for _ in range(data["repeats"]):  # the two stores alternated
            for name in ("tiny", "large"):
                data["loader"][name].append(_measure("loader", store=stores[name]))
                data["unchecked"][name].append(
                    _measure("loader", store=stores[name], check_blocks=False)
                )
        data["verify"] = [_measure("verify", store=stores["large"]) for _ in range(data["repeats"])]
        data["boundary"] = [
            _measure("boundary", store=stores["small"]) for _ in range(data["repeats"])
        ]
        data["processes"] = _measure("processes", store=stores["large"])
        data["libraries"] = [
            _measure("libraries", store=stores["large"], scratch=f"{root}/libraries")
            for _ in range(data["repeats"])
        ]
        _log("loader, boundary, processes and libraries measured")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = new_result(NAME, TITLE, quick)
    result["data"] = data
    return report(result)


def _rate_medians(data: dict[str, Any]) -> dict[tuple[str, int], dict[str, float]]:
    """Median MB/s and MB per CPU-second of each side at 1 and 2 threads."""
    out = {}
    for side in ("baseline", "prepare"):
        for threads in (1, 2):
            runs = [r for r in data["rates"] if r["side"] == side and r["threads"] == threads]
            out[side, threads] = {
                "wall": median([r["mb_per_s"] for r in runs]),
                "cpu": median([r["mb_per_cpu_s"] for r in runs]),
            }
    return out


def _rate_table(data: dict[str, Any], rates: dict) -> dict[str, Any]:
    rows = []
    for threads in (1, 2):
        b, p = rates["baseline", threads], rates["prepare", threads]
        rows.append(
            [
                str(threads),
                f"{b['wall']:.2f}",
                f"{p['wall']:.2f}",
                f"{p['wall'] / b['wall']:.2f}×",
                f"{b['cpu']:.2f}",
                f"{p['cpu']:.2f}",
                f"{p['cpu'] / b['cpu']:.2f}×",
            ]
        )
    scale = lambda side, kind: rates[side, 2][kind] / rates[side, 1][kind]
    rows.append(
        [
            "2 ÷ 1",
            f"{scale('baseline', 'wall'):.2f}×",
            f"{scale('prepare', 'wall'):.2f}×",
            "",
            f"{scale('baseline', 'cpu'):.2f}×",
            f"{scale('prepare', 'cpu'):.2f}×",
            "",
        ]
    )
    return table(
        f"Prepare rate against encode_batch_fast: BPE of 8,192 tokens, "
        f"{data['sizes_mb']['rate']} MB of JSON lines, median of {data['repeats']}",
        [
            "threads (prepare: workers)",
            "encode_batch_fast MB/s",
            "prepare MB/s",
            "ratio",
            "encode_batch_fast MB per CPU-s",
            "prepare MB per CPU-s",
            "ratio per CPU-s",
        ],
        rows,
        [
            "encode_batch_fast: the texts already in memory, 1 MiB batches, RAYON_NUM_THREADS "
            "threads. prepare: prepare_store from the files (read, parse, tokenize, write); 1 "
            "worker tokenizes in-process, 2 workers are 2 processes of one thread each.",
            "Per CPU-s: bytes over the CPU time of the process and its children, which the load "
            "of other work on the machine leaves alone. Each run is a fresh process; the two "
            "sides alternate.",
        ],
    )


def _prepare_bound(run: dict[str, Any]) -> float:
    """Main process plus two workers at the largest worker's peak (MiB)."""
    return run["peak_rss_main_mib"] + 2 * run["peak_rss_worker_mib"]


def _prepare_table(data: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for name in ("small", "large"):
        r = data["prepare"][name]
        rows.append(
            [
                f"{r['mb']:,.0f}",
                f"{r['tokens']:,}",
                f"{r['store_mib']:,.0f}",
                f"{r['seconds']:.0f}",
                f"{r['mb_per_s']:.2f}",
                f"{r['peak_rss_main_mib']:.0f}",
                f"{r['peak_rss_worker_mib']:.0f}",
                f"{_prepare_bound(r):.0f}",
            ]
        )
    start = data["prepare"]["large"]["rss_at_start_mib"]
    return table(
        "Prepare's peak RSS: BPE, 2 workers",
        [
            "corpus MB",
            "tokens",
            "store MiB",
            "seconds",
            "MB/s",
            "main process peak MiB",
            "largest worker peak MiB",
            "main + 2 × largest worker MiB",
        ],
        rows,
        [
            "Peak RSS of the main process (VmHWM) and of the largest worker (forked: pages "
            "shared with the main process count in both); the last column bounds the total. The "
            f"main process held {start:.0f} MiB before preparing (Python, zoo_train imported).",
        ],
    )


def _us(value: float | None) -> str:
    """Microseconds for a table, or "—" for a figure a stored result predates."""
    return "—" if value is None else f"{value:.0f}"


def _loader_medians(data: dict[str, Any], name: str, kind: str = "loader") -> dict[str, float]:
    runs = data[kind][name]
    keys = (
        "store_mib",
        "open_s",
        "first_batch_s",
        "median_us",
        "p99_us",
        "half_median_us",
        "rss_mib",
        "rss_imported_mib",
    )
    out = {k: median([r[k] for r in runs]) for k in keys}
    if kind == "loader" and data.get("unchecked"):
        out["unchecked_us"] = _loader_medians(data, name, "unchecked")["median_us"]
    return out


def _loader_table(data: dict[str, Any], loaders: dict[str, dict[str, float]]) -> dict[str, Any]:
    batches = data["loader"]["tiny"][0]["batches"]
    rows = [
        [
            f"{data['sizes_mb'][name]:,} MB",
            f"{m['store_mib']:,.0f}",
            f"{m['open_s'] * 1e3:.1f}",
            f"{m['first_batch_s'] * 1e3:.1f}",
            f"{m['median_us']:.0f}",
            _us(m.get("unchecked_us")),
            f"{m['p99_us']:,.0f}",
            f"{m['half_median_us']:.0f}",
            f"{m['rss_mib']:.1f}",
            f"{m['rss_imported_mib']:.1f}",
        ]
        for name, m in loaders.items()
    ]
    return table(
        f"StoreLoader: a {data['sizes_mb']['tiny']} MB store against a "
        f"{data['sizes_mb']['large']:,} MB one, 16 × 1024 batches, median of {data['repeats']}",
        [
            "corpus of the store",
            "store MiB",
            "open ms",
            "first batch ms",
            "µs per batch",
            "µs per batch, blocks unchecked",
            "p99 µs",
            "µs per 8 rows",
            f"peak RSS after {batches:,} batches MiB",
            "RSS after importing zoo_train MiB",
        ],
        rows,
        [
            "The target on training from a 1 GB and a 10 MB store is measured at the loader, "
            "the only part of a run that differs between the two (model, step and compilation "
            "are the same). First batch: from StoreLoader(store) (manifest, "
            "document starts) to the first batch returned, opening included.",
            "µs per 8 rows: a process's half of each global batch (rows=(0, 8)). Each run is a "
            "fresh process; the two stores alternate.",
            "Blocks are checked against their xxh3 hashes the first time a read touches them "
            "(as training does); 'blocks unchecked' opens the store with check_blocks=False.",
        ],
    )


def _verify_table(data: dict[str, Any]) -> dict[str, Any]:
    runs = data["verify"]
    return table(
        f"zoo data verify: every block of the {data['sizes_mb']['large']:,} MB corpus's store, "
        f"median of {len(runs)}",
        ["store GB", "blocks", "GB/s, every core", "GB/s, one thread", "cores"],
        [
            [
                f"{runs[0]['bytes'] / 1e9:.2f}",
                f"{runs[0]['blocks']:,}",
                f"{median([r['all_gb_per_s'] for r in runs]):.2f}",
                f"{median([r['one_gb_per_s'] for r in runs]):.2f}",
                str(runs[0]["cores"]),
            ]
        ],
        [
            "Memory-mapped pieces of 16 blocks hashed by a thread pool (xxhash releases the GIL); "
            "the store was just written, so it is read mostly from the page cache."
        ],
    )


def _boundary_table(data: dict[str, Any]) -> dict[str, Any]:
    runs = data["boundary"]
    rows = [
        [
            str(i + 1),
            f"{r['repeated_median_us']:,.0f}",
            f"{r['repeated_slowest_at_boundary_us']:,.0f}",
            f"{r['ratio']:.2f}×",
            f"{r['single_pass_median_us']:,.0f}",
            f"{r['single_pass_slowest_at_boundary_us']:,.0f}",
            f"{r['single_pass_slowest_overall_us']:,.0f}",
        ]
        for i, r in enumerate(runs)
    ]
    return table(
        f"Batches across epoch boundaries: three epochs of the {data['sizes_mb']['small']} MB "
        f"store ({runs[0]['rows_per_epoch']:,} rows per epoch), 16 × 1024",
        [
            "run",
            "median µs",
            "slowest across a boundary µs",
            "ratio",
            "single pass: median µs",
            "single pass: slowest across a boundary µs",
            "single pass: slowest anywhere µs",
        ],
        rows,
        [
            "Median and slowest: each batch's median over 21 calls of batch(step, 16), for the "
            "batches on either side of each boundary against ~40 spread over the epochs. A "
            "single pass times each batch once, in order.",
        ],
    )


def _processes_table(data: dict[str, Any]) -> dict[str, Any]:
    p = data["processes"]
    per_batch, total = p["global_tokens_per_batch"], p["global_tokens_per_batch"] * p["batches"]
    io = [*p["bytes_read"], p["bytes_read_one_process"]] if p["bytes_read"] else [None] * 3
    span = lambda pair: f"{pair[0]:,}" if pair[0] == pair[1] else f"{pair[0]:,}–{pair[1]:,}"
    parts = [
        [str(i), span(p["rows_per_batch"][i]), span(p["tokens_per_batch"][i]), p["tokens_read"][i]]
        for i in range(2)
    ]
    rows = [
        [*cells[:3], f"{cells[3]:,}", f"{cells[3] / total:.1%}",
         "—" if read is None else f"{read:,}", f"{rows * p['row_bytes'] * p['batches']:,}"]
        for cells, read, rows in zip(
            [*parts, ["one process, whole batches", str(BATCH), f"{per_batch:,}", total]],
            io, (BATCH // 2, BATCH // 2, BATCH), strict=True,
        )
    ]  # fmt: skip
    return table(
        f"Two processes, each reading its 8 rows of every global batch of 16 × 1024: "
        f"{p['batches']} batches of the {data['sizes_mb']['large']:,} MB store",
        ["process", "rows per batch", "tokens per batch", "tokens read", "share of all tokens",
         "bytes read", "bytes its rows hold"],
        rows,
        [
            "Both loaders run in one process with the rows each of 2 processes asks for "
            "(rows=(8p, 8p + 8)), called in turn; bytes read: Linux rchar between calls. Rows "
            f"are 1,025 tokens. Together the halves equal the 1-process batches: "
            f"{p['same_batches']}.",
        ],
    )  # fmt: skip


def _library_table(data: dict[str, Any]) -> dict[str, Any]:
    runs = data["libraries"]
    rows = []
    for key, label in LIBRARIES.items():
        values = [r[key] for r in runs]
        if any(isinstance(v, str) for v in values):
            rows.append([label, next(v for v in values if isinstance(v, str)), ""])
            continue
        rows.append([label, f"{median(values):,.0f}", f"{min(values):,.0f}–{max(values):,.0f}"])
    return table(
        f"Storage libraries: 16 random rows of 1,025 tokens out of {runs[0]['tokens'] / 1e6:.0f}M "
        f"tokens (µs per batch, median of 300 reads, median of {len(runs)} runs)",
        ["storage", "µs per batch", "range over runs"],
        rows,
        ["ArrayRecord and Grain are not among zoo's dependencies: measured where installed."],
    )


def _rate_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    rates = _rate_medians(data)
    out = []
    ratios = {t: rates["prepare", t]["wall"] / rates["baseline", t]["wall"] for t in (1, 2)}
    out.append(
        target(
            f"prepare with a BPE tokenizer ≥ {PREPARE_VS_BASELINE}× encode_batch_fast, same text "
            "and threads",
            "; ".join(
                f"{t} thread{'s' * (t > 1)}: {ratios[t]:.2f}× ({rates['prepare', t]['wall']:.2f}"
                f" vs {rates['baseline', t]['wall']:.2f} MB/s)"
                for t in (1, 2)
            ),
            all(r >= PREPARE_VS_BASELINE for r in ratios.values()),
        )
    )
    two = rates["prepare", 2]["wall"] / rates["prepare", 1]["wall"]
    base_two = rates["baseline", 2]["wall"] / rates["baseline", 1]["wall"]
    # Where encode_batch_fast itself gains less than the target from a second thread, the
    # machine has no second core to give: the target cannot be shown here either way.
    shown = two >= TWO_WORKERS or base_two >= TWO_WORKERS
    out.append(
        target(
            f"prepare with 2 workers ≥ {TWO_WORKERS}× one worker",
            f"{two:.2f}× (encode_batch_fast itself: {base_two:.2f}× with 2 threads against 1"
            f"{'' if shown else ', so this machine cannot show it'})",
            two >= TWO_WORKERS if shown else None,
        )
    )
    return out


def _memory_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Prepare's and the loader's memory, and the first batch: met only at the targets' sizes (100 MB, 1 GB)."""
    out = []
    sizes = data["sizes_mb"]
    full = sizes["small"] >= 100 and sizes["large"] >= 1000
    quick_note = "" if full else "; quick run: 1 GB only in the full run"
    bounds = {n: _prepare_bound(data["prepare"][n]) for n in ("small", "large")}
    out.append(
        target(
            f"prepare's peak RSS ≤ {PREPARE_RSS_MIB / 1024:.0f} GiB for a 100 MB and a 1 GB corpus",
            "; ".join(
                f"{sizes[n]:,} MB: {bounds[n]:.0f} MiB (main {data['prepare'][n]['peak_rss_main_mib']:.0f}"
                f" + 2 × worker {data['prepare'][n]['peak_rss_worker_mib']:.0f})"
                for n in ("small", "large")
            )
            + quick_note,
            all(b <= PREPARE_RSS_MIB for b in bounds.values()) if full else None,
        )
    )
    tiny, large = _loader_medians(data, "tiny"), _loader_medians(data, "large")
    rss = large["rss_mib"] - tiny["rss_mib"]
    out.append(
        target(
            f"1 GB store vs 10 MB store: peak RSS within {LOADER_RSS_WITHIN_MIB} MiB (at the loader)",
            f"{large['rss_mib']:.1f} vs {tiny['rss_mib']:.1f} MiB ({rss:+.1f}){quick_note}",
            abs(rss) <= LOADER_RSS_WITHIN_MIB if full else None,
        )
    )
    first = large["first_batch_s"] / tiny["first_batch_s"]
    out.append(
        target(
            f"1 GB store vs 10 MB store: time until the first batch within "
            f"{FIRST_BATCH_WITHIN:.0%} (at the loader)",
            f"{large['first_batch_s'] * 1e3:.1f} vs {tiny['first_batch_s'] * 1e3:.1f} ms "
            f"({first:.2f}×){quick_note}",
            first <= 1 + FIRST_BATCH_WITHIN if full else None,
        )
    )
    return out


def _loader_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    sizes = data["sizes_mb"]
    tiny, large = _loader_medians(data, "tiny"), _loader_medians(data, "large")
    worst = max(data["boundary"], key=lambda r: r["ratio"])
    out.append(
        target(
            f"no stall at epoch boundaries: slowest batch across one ≤ {BOUNDARY_RATIO:.0f}× the "
            "median",
            f"{worst['ratio']:.2f}× ({worst['repeated_slowest_at_boundary_us']:.0f} vs "
            f"{worst['repeated_median_us']:.0f} µs, the worst of {len(data['boundary'])} runs)",
            worst["ratio"] <= BOUNDARY_RATIO,
        )
    )
    out.append(
        target(
            f"loader host time per batch ≤ {BATCH_US:.0f} µs at 16 × 1024 tokens",
            f"{tiny['median_us']:.0f} µs ({sizes['tiny']} MB store), {large['median_us']:.0f} µs "
            f"({sizes['large']:,} MB store), blocks checked; unchecked "
            f"{_us(tiny.get('unchecked_us'))} and {_us(large.get('unchecked_us'))} µs",
            max(tiny["median_us"], large["median_us"]) <= BATCH_US,
        )
    )
    p = data["processes"]
    half = p["global_tokens_per_batch"] // 2
    halves = all(pair == [half, half] for pair in p["tokens_per_batch"])
    io, held = p["bytes_read"], BATCH // 2 * p["row_bytes"] * p["batches"]
    read = f"; bytes read {io[0]:,} and {io[1]:,} (its rows: {held:,})" if io else ""
    out.append(
        target(
            "2 processes: each reads half of each global batch's tokens (counted)",
            f"{half:,} of {p['global_tokens_per_batch']:,} tokens of each of {p['batches']} batches, "
            f"each process{read}; together the 1-process batches: {p['same_batches']}",
            halves and p["same_batches"],
        )
    )
    return out


def report(result: dict[str, Any]) -> dict[str, Any]:
    """Tables and targets of ``result``, derived from its raw numbers alone."""
    data = result["data"]
    loaders = {name: _loader_medians(data, name) for name in ("tiny", "large")}
    result["tables"] = [
        _rate_table(data, _rate_medians(data)),
        _prepare_table(data),
        _loader_table(data, loaders),
        *([_verify_table(data)] if data.get("verify") else []),
        _boundary_table(data),
        _processes_table(data),
        _library_table(data),
    ]
    result["targets"] = _rate_targets(data) + _memory_targets(data) + _loader_targets(data)
    result["notes"] = []
    return result
