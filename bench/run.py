"""Run the benchmarks: ``python -m bench.run [--quick] [--only NAME,...]``.

Each benchmark writes ``bench/results/<name>.json`` (``bench/results/quick/`` with
``--quick``) and its PNG plots; ``docs/benchmarks.md`` is then regenerated from the newest
full-run result of every benchmark (a quick result fills in where no full run exists). The
tables and the targets are printed last. The flash-kernel benchmarks live beside their kernel,
in ``kernels/flash-tpu/bench/``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import (
    attention,
    checkpoint_io,
    compile_time,
    cross_entropy,
    data,
    eval_harness,
    grpo,
    loop,
    mesh,
    moe,
    profile_step,
    soak,
    tpu_fit,
    tpu_kernels,
    training,
    versus_maxtext,
)
from .harness import (
    RESULTS_DIR,
    ROOT,
    console,
    describe_machine,
    read_results,
    results_dir,
    unavailable,
    write_markdown,
    write_result,
)

# The flash-kernel benchmarks are modules of that directory (their workers get it on PYTHONPATH).
sys.path.insert(0, str(ROOT / "kernels" / "flash-tpu" / "bench"))
FLASH = [importlib.import_module(f"flash_{n}") for n in ("tpu", "traffic", "versus", "vmem")]
MODULES: list[ModuleType] = [
    training, loop, profile_step, attention, compile_time, checkpoint_io, data, *FLASH, mesh,
    moe, cross_entropy, eval_harness, grpo, tpu_fit, tpu_kernels, versus_maxtext, soak,
]  # fmt: skip
BENCHMARKS: dict[str, ModuleType] = {m.NAME: m for m in MODULES}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes and few steps")
    parser.add_argument(
        "--only",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        default=list(BENCHMARKS),
        help=f"comma list of benchmarks to run (default all: {','.join(BENCHMARKS)})",
    )
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
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


def _finish(result: dict[str, Any], directory: Any) -> None:
    """Draw the result's plots (none when it is unavailable) and write its JSON."""
    plot = getattr(BENCHMARKS[result["name"]], "plot", None)
    result["plots"] = (
        plot(result, directory) if plot is not None and result["status"] == "ok" else []
    )
    write_result(result, directory)


def run_one(name: str, quick: bool) -> dict[str, Any]:
    """Run one benchmark; a crash becomes an "unavailable" result naming the error."""
    module = BENCHMARKS[name]
    machine = describe_machine()
    start = time.perf_counter()
    try:
        result = module.run(quick)
    except Exception as err:
        traceback.print_exc()
        first = str(err).splitlines()[0] if str(err) else ""
        result = unavailable(name, module.TITLE, quick, f"failed: {type(err).__name__}: {first}")
    machine["torch_threads"] = training.THREADS
    machine["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    result["machine"] = machine
    result["wall_s"] = time.perf_counter() - start
    _finish(result, results_dir(quick))
    print(f"[bench] {name}: {result['status']} in {result['wall_s']:.0f} s", file=sys.stderr)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parse(argv)
    start = time.perf_counter()
    results = [] if args.docs_only else [run_one(name, args.quick) for name in args.only]
    if not args.no_docs:
        full, quick = read_results(RESULTS_DIR), read_results(results_dir(True))
        chosen = [full.get(n) or quick[n] for n in BENCHMARKS if n in full or n in quick]
        dirs = {r["name"]: results_dir(r["name"] not in full) for r in chosen}
        if args.docs_only:  # tables and plots follow the JSON too
            for result in chosen:
                report = getattr(BENCHMARKS[result["name"]], "report", None)
                if report is not None and result["status"] == "ok":
                    report(result)
                _finish(result, dirs[result["name"]])
        print(f"[bench] wrote {write_markdown(chosen, dirs)}", file=sys.stderr)
    print(f"[bench] total {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    print(console(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
