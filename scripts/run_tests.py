"""Run each package's tests and the integration tests, then print one summary.

Usage: python scripts/run_tests.py [SUITE ...] [-- PYTEST_ARGS ...]

Each suite runs in its own pytest process (packages stay independent: no shared conftest, no
import-order coupling) and writes a JUnit report and its full output under .test-reports/.
Suites run side by side, as many at a time as the machine has cores (``ZOO_TEST_JOBS``
overrides): most of a suite's time is XLA compiling small programs on one thread, so two
suites on two cores take little more than the longer of them. While they run, a line every
half minute says how far each running suite is (tests done out of its total, from the
``pytest_progress`` plugin beside this script); each suite's output is printed whole when it
ends.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / ".test-reports"

MULTIDEVICE = "tests/multidevice"
# Eight fake CPU devices: the flag must be set before jax is imported, so the suite that needs
# them runs in a process of its own with it.
EIGHT_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}

# name -> (tests directory, extra pytest arguments, extra environment). Listed longest first, so
# the longest start first and the short ones fill in at the end.
SUITES: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "zoo-train": ("training/zoo-train/tests", [], {}),
    "zoo-flash-tpu": ("kernels/flash-tpu/tests", [], {}),
    "integration": ("tests", [f"--ignore={MULTIDEVICE}"], {}),
    "zoo-models": ("models/zoo-models/tests", [], {}),
    "multidevice": (MULTIDEVICE, [], EIGHT_DEVICES),
    "zoo-chunked": ("kernels/chunked/tests", [], {}),
    "zoo-layers": ("packages/zoo-layers/tests", [], {}),
    "zoo-attention": ("packages/zoo-attention/tests", [], {}),
    # The harness and training benchmarks, and the flash-kernel benchmarks beside their kernel.
    "bench": ("bench/tests", ["kernels/flash-tpu/bench/tests"], {}),
}


# Defaults the environment can override. Most of a suite's time is XLA:CPU compiling small
# programs. LLVM's optimisation passes are most of that: without them the XLA programs (HLO
# passes, buffer assignment, memory figures) are the same and only the machine code is less
# optimised (JAX_DISABLE_MOST_OPTIMIZATIONS=0 tests the optimised build). And many tests compile
# the same program again (a run and its resume, a CLI subprocess): a persistent compilation
# cache per suite, emptied before every run, compiles each once.
TEST_ENV = {
    "JAX_DISABLE_MOST_OPTIMIZATIONS": "1",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
}
CACHE = REPORTS / "jax-cache"
SCRIPTS = Path(__file__).resolve().parent
#: Seconds between the progress lines of the running suites.
PROGRESS_EVERY = 30.0


def _jobs() -> int:
    value = os.environ.get("ZOO_TEST_JOBS")
    if value:
        return max(1, int(value))
    return max(1, len(os.sched_getaffinity(0)))


def _counts(report: Path) -> dict[str, float]:
    counts = {"tests": 0.0, "failures": 0.0, "errors": 0.0, "skipped": 0.0}
    if not report.exists():
        return counts
    root = ET.parse(report).getroot()
    for suite in [root] if root.tag == "testsuite" else root.iter("testsuite"):
        for key in counts:
            counts[key] += float(suite.get(key, 0))
    return counts


def _run_suite(
    name: str, extra: list[str], lock: threading.Lock, running: dict[str, float]
) -> tuple:
    path, args, suite_env = SUITES[name]
    report = REPORTS / f"{name}.xml"
    log = REPORTS / f"{name}.log"
    report.unlink(missing_ok=True)
    cache = CACHE / name
    shutil.rmtree(cache, ignore_errors=True)
    progress = REPORTS / f"{name}.progress"
    progress.unlink(missing_ok=True)
    env = {"JAX_COMPILATION_CACHE_DIR": str(cache), **TEST_ENV, **os.environ, **suite_env}
    env["ZOO_TEST_PROGRESS"] = str(progress)
    # The progress plugin is importable from here; the tests' own imports are unchanged.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPTS), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    with lock:
        print(f"[{time.strftime('%H:%M:%S')}] {name}: started", flush=True)
        running[name] = start
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        path,
        "-p",
        "no:cacheprovider",
        "-p",
        "pytest_progress",
        f"--junitxml={report}",
        "-q",
        *args,
        *extra,
    ]
    with log.open("w") as out:
        code = subprocess.call(
            cmd,
            cwd=ROOT,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    seconds = time.perf_counter() - start
    with lock:
        running.pop(name, None)
        print(f"\n=== {name} ({path}) {seconds:.0f} s ===", flush=True)
        print(log.read_text().rstrip(), flush=True)
    c = _counts(report)
    failed = int(c["failures"] + c["errors"])
    passed = int(c["tests"] - c["failures"] - c["errors"] - c["skipped"])
    # A suite that ran nothing, or whose process failed without failing a test, counts as failed.
    ok = code == 0 and passed > 0
    return (name, passed, failed, int(c["skipped"]), seconds, ok, code)


def _progress_line(running: dict[str, float]) -> str | None:
    """``zoo-train 45/120 (2 failed), integration 3/30`` for the suites running now."""
    parts = []
    for name, started in running.items():
        try:
            p = json.loads((REPORTS / f"{name}.progress").read_text())
        except (OSError, ValueError):
            parts.append(f"{name} collecting")
            continue
        failed = f" ({p['failed']} failed)" if p["failed"] else ""
        minutes = (time.perf_counter() - started) / 60
        parts.append(f"{name} {p['done']}/{p['total']}{failed} {minutes:.0f} min")
    return ", ".join(parts) or None


def _report_progress(
    running: dict[str, float], lock: threading.Lock, done: threading.Event
) -> None:
    """Every :data:`PROGRESS_EVERY` seconds, one line: how far each running suite is."""
    while not done.wait(PROGRESS_EVERY):
        with lock:
            line = _progress_line(dict(running))
            if line:
                print(f"[{time.strftime('%H:%M:%S')}] running: {line}", flush=True)


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    names = argv or list(SUITES)
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        print(f"unknown suite(s) {unknown}; known: {', '.join(SUITES)}", file=sys.stderr)
        return 2
    REPORTS.mkdir(exist_ok=True)
    jobs = min(_jobs(), len(names))
    print(f"running {len(names)} suite(s), {jobs} at a time", flush=True)
    lock = threading.Lock()
    wall = time.perf_counter()
    running: dict[str, float] = {}
    finished = threading.Event()
    reporter = threading.Thread(
        target=_report_progress, args=(running, lock, finished), daemon=True
    )
    reporter.start()
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_suite, name, extra, lock, running) for name in names]
            done = {f.result()[0]: f.result() for f in as_completed(futures)}
    finally:
        finished.set()
    rows = [done[name] for name in names]

    print("\n" + "=" * 64)
    print(f"{'suite':<16}{'passed':>8}{'failed':>8}{'skipped':>9}{'seconds':>10}  status")
    for name, passed, failed, skipped, seconds, ok, code in rows:
        status = "ok" if ok else f"FAILED (exit {code})"
        print(f"{name:<16}{passed:>8}{failed:>8}{skipped:>9}{seconds:>10.1f}  {status}")
    total_passed = sum(r[1] for r in rows)
    total_failed = sum(r[2] for r in rows) + sum(1 for r in rows if not r[5] and r[2] == 0)
    total_skipped = sum(r[3] for r in rows)
    print("=" * 64)
    print(
        f"{total_passed} passed, {total_failed} failed, {total_skipped} skipped "
        f"in {time.perf_counter() - wall:.0f} s wall"
    )
    return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
