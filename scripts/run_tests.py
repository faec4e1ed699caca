"""Run each package's tests and the integration tests, then print one summary.

Usage: python scripts/run_tests.py [--with-newest | --newest] [--full] [SUITE ...] [-- PYTEST_ARGS ...]

Two JAX legs: the default one is this interpreter (``.venv``: jax 0.10.2 on Python 3.11), the
newest one is ``.venv-newest`` (jax 0.12 on Python >= 3.12, libtpu's compile environment in
``.venv-newest-tpu``). ``--with-newest`` (``make test``) adds the newest leg's
:data:`NEWEST_LEG` suites to the default run, in the same pool and the same summary; where the
newest environment is missing, the summary says in one line that the leg did not run.
``--newest`` (``make test-newest``) runs the named suites, every one by default, on the newest
leg alone, and fails where it cannot.

Cases marked ``full`` (``pytest.ini``: a long case that repeats what a shorter one checks,
through the same code) are left out of the default leg and ``make test``'s newest leg, so
``make test`` keeps its budget; ``--full`` (``make test-full``) runs them on the default leg,
and ``--newest`` always runs them, so CI runs every case.

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

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import newest_python  # beside this script

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
    "zoo-splash": ("kernels/splash/tests", [], {}),
    "zoo-megablox": ("kernels/megablox/tests", [], {}),
    "zoo-deltanet-tpu": ("kernels/deltanet-tpu/tests", [], {}),
    "zoo-layers": ("packages/zoo-layers/tests", [], {}),
    "zoo-attention": ("packages/zoo-attention/tests", [], {}),
    "zoo-data": ("data/zoo-data/tests", [], {}),
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

#: The newest-JAX leg's environments (made by ``make install`` where a Python >= 3.12 exists).
NEWEST_VENV = ROOT / ".venv-newest"
NEWEST_TPU_VENV = ROOT / ".venv-newest-tpu"
#: What ``make test`` runs on the newest leg: the contract, the kernels (with their TPU compile
#: tests against the newest libtpu), and a training smoke (through the layers and models).
#: ``make test-newest`` (which ``.ci/run`` runs after ``make test``) runs every suite there.
NEWEST_LEG = (
    "zoo-flash-tpu", "train-smoke", "zoo-chunked", "zoo-splash", "zoo-megablox", "zoo-tokamax",
    "zoo-attention", "zoo-deltanet-tpu",
)  # fmt: skip
#: Within ``make test``'s newest leg, ``zoo-flash-tpu`` runs the shared conformance suite, its
#: compile test (one program for each of v4, v5e, v5p and v6e) and the rest of its checks, but
#: not its longest extras (the kernel's block-skip and sharding tests, two large conformance
#: cases), and ``zoo-splash`` compiles no program (flash_tpu's, megablox's and the others'
#: compiles check the newest libtpu there): those run on the newest JAX in ``make
#: test-newest``, so the leg stays within its five minutes. The ``full`` cases are left out too.
NEWEST_LEG_ARGS: dict[str, list[str]] = {
    "zoo-flash-tpu": [
        "--ignore=kernels/flash-tpu/tests/test_flash_kernel.py",
        "-k", "not test_gqa_groups_with_segments_and_window and not test_gemma3_head_dim_256",
    ],
    "zoo-splash": ["-k", "not test_every_generation_compiled_each_program"],
}  # fmt: skip
#: Suites of the newest leg alone: train, kill and resume a run, and the installed JAX kept.
NEWEST_ONLY: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "train-smoke": ("training/zoo-train/tests/test_kill.py", ["tests/test_jax_range.py"], {}),
    # tokamax needs jax >= 0.11.1 (Python >= 3.12): its kernel package lives on this leg alone.
    "zoo-tokamax": ("kernels/tokamax/tests", [], {}),
}
#: Packages of the newest leg alone: ``--newest`` runs their suites with every other one.
NEWEST_PACKAGE_SUITES = ("zoo-tokamax",)


@dataclasses.dataclass(frozen=True)
class Leg:
    """One interpreter the suites run on: its label in the summary, its python, the prefix of
    its reports and the environment it adds."""

    label: str
    python: str
    prefix: str = ""
    env: tuple[tuple[str, str], ...] = ()
    #: ``make test``'s newest leg: suites narrowed by :data:`NEWEST_LEG_ARGS`.
    narrowed: bool = False
    #: Run the cases marked ``full`` too.
    full: bool = False


DEFAULT = Leg("", sys.executable)
NEWEST = Leg(
    "newest JAX",
    str(NEWEST_VENV / "bin" / "python"),
    "newest-",
    (("ZOO_TPU_PYTHON", str(NEWEST_TPU_VENV / "bin" / "python")),),
    full=True,
)
NEWEST_SMOKE = dataclasses.replace(NEWEST, narrowed=True, full=False)
FULL = dataclasses.replace(DEFAULT, full=True)
#: The marker expression that leaves the ``full`` cases out.
NOT_FULL = ["-m", "not full"]
#: Seconds between the progress lines of the running suites.
PROGRESS_EVERY = 30.0


def _jobs() -> int:
    value = os.environ.get("ZOO_TEST_JOBS")
    if value:
        return max(1, int(value))
    return max(1, len(os.sched_getaffinity(0)))


def _counts(report: Path) -> dict[str, float]:
    counts = {"tests": 0.0, "failures": 0.0, "errors": 0.0, "skipped": 0.0, "time": 0.0}
    if not report.exists():
        return counts
    root = ET.parse(report).getroot()
    for suite in [root] if root.tag == "testsuite" else root.iter("testsuite"):
        for key in counts:
            counts[key] += float(suite.get(key, 0))
    return counts


def _run_suite(
    name: str, extra: list[str], lock: threading.Lock, running: dict[str, float], leg: Leg = DEFAULT
) -> tuple:
    path, args, suite_env = {**SUITES, **NEWEST_ONLY}[name]
    if leg.narrowed:
        args = [*args, *NEWEST_LEG_ARGS.get(name, [])]
    if not leg.full:
        args = [*args, *NOT_FULL]
    key = leg.prefix + name
    report = REPORTS / f"{key}.xml"
    log = REPORTS / f"{key}.log"
    report.unlink(missing_ok=True)
    cache = CACHE / key
    shutil.rmtree(cache, ignore_errors=True)
    progress = REPORTS / f"{key}.progress"
    progress.unlink(missing_ok=True)
    env = {"JAX_COMPILATION_CACHE_DIR": str(cache), **TEST_ENV, **os.environ, **suite_env}
    env.update(leg.env)
    env["ZOO_TEST_PROGRESS"] = str(progress)
    # The progress plugin is importable from here; the tests' own imports are unchanged.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SCRIPTS), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    title = f"{name} [{leg.label}]" if leg.label else name
    with lock:
        print(f"[{time.strftime('%H:%M:%S')}] {title}: started", flush=True)
        running[key] = start
    cmd = [
        leg.python,
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
    env["ZOO_TEST_CPU"] = str(REPORTS / f"{key}.cpu.json")
    with log.open("w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        # wait4 gives this suite's own CPU time (its subprocesses' included), which the
        # machine's load hardly changes: the figure to budget by on a busy machine.
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    seconds = time.perf_counter() - start
    with lock:
        running.pop(key, None)
        print(f"\n=== {title} ({path}) {seconds:.0f} s ===", flush=True)
        print(log.read_text().rstrip(), flush=True)
    c = _counts(report)
    failed = int(c["failures"] + c["errors"])
    passed = int(c["tests"] - c["failures"] - c["errors"] - c["skipped"])
    # A suite that ran nothing, or whose process failed without failing a test, counts as failed.
    ok = code == 0 and passed > 0
    try:
        left_out = int(json.loads(progress.read_text()).get("deselected", 0))
    except (OSError, ValueError):
        left_out = 0
    return (title, passed, failed, int(c["skipped"]), seconds, cpu, ok, code, left_out)


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


def _leg_versions(leg: Leg) -> str:
    """``jax 0.12.0.1, Python 3.12.1`` for the leg's interpreter."""
    probe = "import importlib.metadata as m, sys; print(m.version('jax'), sys.version.split()[0])"
    out = subprocess.run([leg.python, "-c", probe], capture_output=True, text=True).stdout.split()
    return f"jax {out[0]}, Python {out[1]}" if len(out) == 2 else "versions unknown"


def newest_missing() -> str | None:
    """Why the newest-JAX leg cannot run here, or ``None`` when its environments exist."""
    if os.access(NEWEST.python, os.X_OK) and os.access(dict(NEWEST.env)["ZOO_TPU_PYTHON"], os.X_OK):
        return None
    if newest_python.find() is None:
        return "no Python 3.12 or 3.13 on this machine (PATH, pyenv, $ZOO_NEWEST_PYTHON)"
    return f"{NEWEST_VENV.name} or {NEWEST_TPU_VENV.name} is missing; `make install` creates them"


def _last_seconds(leg: Leg, name: str) -> float | None:
    try:
        return _counts(REPORTS / f"{leg.prefix}{name}.xml")["time"] or None
    except (ET.ParseError, ValueError):
        return None


def _schedule(jobs: list[tuple[Leg, str]]) -> list[tuple[Leg, str]]:
    """Longest first, by each suite's last report; without reports, the legs' own orders
    interleaved (each lists its longest first)."""
    last = {job: _last_seconds(*job) for job in jobs}
    if all(last.values()):
        return sorted(jobs, key=lambda job: -(last[job] or 0))
    by_leg: dict[str, list[tuple[Leg, str]]] = {}
    for job in jobs:
        by_leg.setdefault(job[0].label, []).append(job)
    queues = list(by_leg.values())
    ordered = []
    while any(queues):
        ordered += [q.pop(0) for q in queues if q]
    return ordered


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    with_newest = "--with-newest" in argv
    newest_only = "--newest" in argv
    default = FULL if "--full" in argv else DEFAULT
    names = [a for a in argv if a not in ("--with-newest", "--newest", "--full")]
    names = names or [*SUITES, *(NEWEST_PACKAGE_SUITES if newest_only else ())]
    known = {**SUITES, **NEWEST_ONLY} if newest_only else SUITES
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown suite(s) {unknown}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    jobs: list[tuple[Leg, str]] = [] if newest_only else [(default, n) for n in names]
    skipped_leg = newest_missing() if (with_newest or newest_only) else None
    if skipped_leg is None and newest_only:
        jobs = [(NEWEST, n) for n in names]
    elif skipped_leg is None and with_newest:
        jobs += [(NEWEST_SMOKE, n) for n in NEWEST_LEG]
    if newest_only and skipped_leg is not None:
        print(f"the newest-JAX leg cannot run: {skipped_leg}", file=sys.stderr)
        return 1
    REPORTS.mkdir(exist_ok=True)
    jobs = _schedule(jobs)
    workers = min(_jobs(), len(jobs))
    print(f"running {len(jobs)} suite(s), {workers} at a time", flush=True)
    for leg in dict.fromkeys(leg for leg, _ in jobs):
        print(f"  {leg.label or 'default'} leg: {_leg_versions(leg)} ({leg.python})", flush=True)
    lock = threading.Lock()
    wall = time.perf_counter()
    running: dict[str, float] = {}
    finished = threading.Event()
    reporter = threading.Thread(
        target=_report_progress, args=(running, lock, finished), daemon=True
    )
    reporter.start()
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {
                job: pool.submit(_run_suite, job[1], extra, lock, running, job[0]) for job in jobs
            }
            results = {job: f.result() for job, f in futures.items()}
    finally:
        finished.set()
    legs_order = {DEFAULT.label: 0, NEWEST.label: 1}
    rows = [results[job] for job in sorted(jobs, key=lambda j: legs_order[j[0].label])]

    print("\n" + "=" * 76)
    print(
        f"{'suite':<28}{'passed':>8}{'failed':>8}{'skipped':>9}{'seconds':>10}{'cpu s':>8}  status"
    )
    for name, passed, failed, skipped, seconds, cpu, ok, code, _ in rows:
        status = "ok" if ok else f"FAILED (exit {code})"
        print(f"{name:<28}{passed:>8}{failed:>8}{skipped:>9}{seconds:>10.1f}{cpu:>8.0f}  {status}")
    if skipped_leg is not None:
        print(f"newest-JAX leg did not run: {skipped_leg}")
    total_passed = sum(r[1] for r in rows)
    total_failed = sum(r[2] for r in rows) + sum(1 for r in rows if not r[6] and r[2] == 0)
    total_skipped = sum(r[3] for r in rows)
    left_out = sum(r[8] for r in rows)
    if left_out:
        print(
            f"{left_out} long cases marked `full` left out (each repeats a shorter case's code "
            "path): `make test-full` runs them, and `make test-newest` on the newest JAX"
        )
    print("=" * 76)
    print(
        f"{total_passed} passed, {total_failed} failed, {total_skipped} skipped "
        f"in {time.perf_counter() - wall:.0f} s wall, {sum(r[5] for r in rows):.0f} CPU seconds"
    )
    return 0 if all(r[6] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
