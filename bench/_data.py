"""Token store benchmark ("data"): what the data path costs with no training at all.

- prepare with a BPE tokenizer against ``tokenizers``' own ``encode_batch_fast`` over the same
  text with the same threads (``RAYON_NUM_THREADS``), side by side; 2 workers against 1;
- prepare's peak RSS (the main process and the largest worker) for a 100 MB and a 1 GB corpus;
- loader host time per batch at 16 x 1024 tokens, and the slowest batch across an epoch
  boundary against the median;
- rows and tokens each of 2 processes reads of every global batch;
- random reads of 16 rows of 1025 tokens from NumPy memory-maps (the store), tensorstore,
  ArrayRecord and Grain (``MapDataset`` with its index shuffle), where installed.

Every measurement runs in a fresh process (``python -m bench._data_worker``), a few times;
medians. Synthetic text (random words of a fixed vocabulary, in files of ~1 MB) is written
under a temporary directory and deleted afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

NAME = "data"
TITLE = "Token store: prepare rate and memory, loader time, process sharding, storage libraries"


def _worker(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench._data_worker", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench._data_worker {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class _Result(dict):
    """The result, rewritten to a file after every entry (a long run keeps what it measured)."""

    def __init__(self, path: str | None, **items: Any) -> None:
        super().__init__(items)
        self.path = path

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if self.path:
            with open(self.path, "w") as f:
                json.dump(self, f, indent=1)


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def run(
    quick: bool, repeats: int = 3, save: str | None = None, only: tuple[str, ...] = ()
) -> dict[str, Any]:
    """All measurements (``only=("rate",)``: the prepare rates alone); returns a JSON-ready
    dict (also written to ``save`` as it grows)."""
    root = tempfile.mkdtemp(prefix="zoo-bench-data-")
    result = _Result(save, name=NAME, title=TITLE, quick=quick, repeats=repeats)
    try:
        small_mb, big_mb = (20, 100) if quick else (100, 1000)
        tok = _worker("tokenizer", root)["path"]
        rate_corpus = _worker("corpus", f"{root}/rate", "10" if quick else "40")["path"]
        rates: dict[str, list[float]] = {}
        for _ in range(repeats):
            for threads in (1, 2):
                env = {"RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
                for what in ("baseline", "prepare"):
                    r = _worker(what, rate_corpus, tok, str(threads), f"{root}/s", env=env)
                    rates.setdefault(f"{what}_{threads}", []).append(r["mb_per_s"])
                    rates.setdefault(f"{what}_{threads}_per_cpu_s", []).append(r["mb_per_cpu_s"])
        result["rate_mb_per_s"] = {k: {"median": _median(v), "runs": v} for k, v in rates.items()}
        for threads in (1, 2):
            p, b = rates[f"prepare_{threads}"], rates[f"baseline_{threads}"]
            result[f"prepare_vs_encode_batch_fast_{threads}"] = _median(p) / _median(b)
        result["prepare_2_vs_1_workers"] = _median(rates["prepare_2"]) / _median(rates["prepare_1"])
        if only == ("rate",):
            return result
        memory = {}
        for mb in (small_mb, big_mb):
            corpus = _worker("corpus", f"{root}/mem{mb}", str(mb))["path"]
            memory[f"{mb}MB"] = _worker("prepare", corpus, tok, "2", f"{root}/store{mb}")
            shutil.rmtree(corpus)
        result["prepare_memory"] = memory
        store = f"{root}/store{big_mb}"
        result["loader"] = [_worker("loader", store) for _ in range(repeats)]
        tiny = _worker("corpus", f"{root}/mem10", "10")["path"]
        _worker("prepare", tiny, tok, "2", f"{root}/store10")
        result["loader_10MB"] = [_worker("loader", f"{root}/store10") for _ in range(repeats)]
        result["epoch_boundary"] = [
            _worker("boundary", f"{root}/store{small_mb}") for _ in range(repeats)
        ]
        result["processes"] = _worker("processes", store)
        result["libraries"] = [_worker("libraries", store, f"{root}/libs") for _ in range(repeats)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return result


if __name__ == "__main__":
    save = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--save=")), None)
    only = ("rate",) if "--only=rate" in sys.argv else ()
    print(json.dumps(run("--quick" in sys.argv, save=save, only=only), indent=1))
