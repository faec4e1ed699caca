"""Run the benchmarks: ``python -m bench.run [--quick] [--only NAME,...]``.

Each benchmark writes ``bench/results/<name>.json`` (``bench/results/quick/`` with
``--quick``) and its PNG plots; ``docs/benchmarks.md`` is then regenerated from the newest
full-run result of every benchmark (a quick result fills in where no full run exists). The
tables and the targets are printed last.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from . import (
    _attention,
    _checkpoint_io,
    _compile_time,
    _flash_tpu,
    _flash_traffic,
    _flash_versus,
    _flash_vmem,
    _loop_overhead,
    _mesh,
    _profile_step,
    _soak,
    _tpu_fit,
    _train_throughput,
)
from ._machine import describe_machine
from ._plots import plot
from ._report import console, write_markdown
from ._results import RESULTS_DIR, read_results, results_dir, unavailable, write_result

BENCHMARKS: dict[str, tuple[str, Callable[[bool], dict[str, Any]]]] = {
    _train_throughput.NAME: (_train_throughput.TITLE, _train_throughput.run),
    _loop_overhead.NAME: (_loop_overhead.TITLE, _loop_overhead.run),
    _profile_step.NAME: (_profile_step.TITLE, _profile_step.run),
    _attention.NAME: (_attention.TITLE, _attention.run),
    _compile_time.NAME: (_compile_time.TITLE, _compile_time.run),
    _checkpoint_io.NAME: (_checkpoint_io.TITLE, _checkpoint_io.run),
    _flash_tpu.NAME: (_flash_tpu.TITLE, _flash_tpu.run),
    _flash_traffic.NAME: (_flash_traffic.TITLE, _flash_traffic.run),
    _flash_versus.NAME: (_flash_versus.TITLE, _flash_versus.run),
    _flash_vmem.NAME: (_flash_vmem.TITLE, _flash_vmem.run),
    _mesh.NAME: (_mesh.TITLE, _mesh.run),
    _tpu_fit.NAME: (_tpu_fit.TITLE, _tpu_fit.run),
    _soak.NAME: (_soak.TITLE, _soak.run),
}

# Benchmarks whose tables are derived from stored raw numbers; ``--docs-only`` re-derives them.
REPORTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    _train_throughput.NAME: _train_throughput.report,
    _tpu_fit.NAME: _tpu_fit.report,
}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small sizes and few steps (under 3 minutes)"
    )
    parser.add_argument(
        "--only",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        default=list(BENCHMARKS),
        help=f"comma list of benchmarks to run (default all: {','.join(BENCHMARKS)})",
    )
    parser.add_argument(
        "--no-docs", action="store_true", help="do not regenerate docs/benchmarks.md"
    )
    parser.add_argument(
        "--docs-only",
        action="store_true",
        help="only regenerate tables, plots and docs/benchmarks.md from the stored JSON",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.only if n not in BENCHMARKS]
    if unknown:
        parser.error(
            f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}."
        )
    return args


def run_one(name: str, quick: bool) -> dict[str, Any]:
    """Run one benchmark; a crash becomes an "unavailable" result naming the error."""
    title, fn = BENCHMARKS[name]
    machine = describe_machine()
    start = time.perf_counter()
    try:
        result = fn(quick)
    except Exception as err:
        traceback.print_exc()
        result = unavailable(
            name,
            title,
            quick,
            f"failed: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
        )
    machine["torch_threads"] = _train_throughput.THREADS
    machine["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    result["machine"] = machine
    result["wall_s"] = time.perf_counter() - start
    directory = results_dir(quick)
    result["plots"] = plot(result, directory)
    write_result(result, directory)
    print(
        f"[bench] {name}: {result['status']} in {result['wall_s']:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return result


def _doc_results() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    full, quick = read_results(RESULTS_DIR), read_results(results_dir(True))
    chosen, dirs = [], {}
    for name in BENCHMARKS:
        if name in full:
            chosen.append(full[name])
            dirs[name] = RESULTS_DIR
        elif name in quick:
            chosen.append(quick[name])
            dirs[name] = results_dir(True)
    return chosen, dirs


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parse(argv)
    start = time.perf_counter()
    results = [] if args.docs_only else [run_one(name, args.quick) for name in args.only]
    if not args.no_docs:
        chosen, dirs = _doc_results()
        if args.docs_only:  # tables and plots follow the JSON too
            for result in chosen:
                if result["name"] in REPORTS and result["status"] == "ok":
                    REPORTS[result["name"]](result)
                result["plots"] = plot(result, dirs[result["name"]])
                write_result(result, dirs[result["name"]])
        path = write_markdown(chosen, dirs)
        print(f"[bench] wrote {path}", file=sys.stderr)
    print(f"[bench] total {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(console(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
