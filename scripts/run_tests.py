"""Run each package's tests and the integration tests, then print one summary.

Usage: python scripts/run_tests.py [SUITE ...] [-- PYTEST_ARGS ...]

Each suite runs in its own pytest process (packages stay independent: no shared conftest, no
import-order coupling) and writes a JUnit report under .test-reports/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / ".test-reports"

# name -> (tests directory, extra pytest arguments)
SUITES: dict[str, tuple[str, list[str]]] = {
    "zoo-attention": ("packages/zoo-attention/tests", []),
    "zoo-chunked": ("kernels/chunked/tests", []),
    "zoo-flash-tpu": ("kernels/flash-tpu/tests", []),
    "zoo-layers": ("packages/zoo-layers/tests", []),
    "zoo-models": ("models/zoo-models/tests", []),
    "zoo-train": ("training/zoo-train/tests", []),
    "integration": ("tests", []),
    "bench": ("bench/tests", []),
}


def _counts(report: Path) -> dict[str, float]:
    counts = {"tests": 0.0, "failures": 0.0, "errors": 0.0, "skipped": 0.0}
    if not report.exists():
        return counts
    root = ET.parse(report).getroot()
    for suite in [root] if root.tag == "testsuite" else root.iter("testsuite"):
        for key in counts:
            counts[key] += float(suite.get(key, 0))
    return counts


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
    rows = []
    for name in names:
        path, args = SUITES[name]
        report = REPORTS / f"{name}.xml"
        report.unlink(missing_ok=True)
        print(f"\n=== {name} ({path}) ===", flush=True)
        start = time.perf_counter()
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            path,
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "-q",
            *args,
            *extra,
        ]
        code = subprocess.call(cmd, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        seconds = time.perf_counter() - start
        c = _counts(report)
        failed = int(c["failures"] + c["errors"])
        passed = int(c["tests"] - c["failures"] - c["errors"] - c["skipped"])
        # A suite that ran nothing, or whose process failed without failing a test, counts as failed.
        ok = code == 0 and passed > 0
        rows.append((name, passed, failed, int(c["skipped"]), seconds, ok, code))

    print("\n" + "=" * 64)
    print(f"{'suite':<16}{'passed':>8}{'failed':>8}{'skipped':>9}{'seconds':>10}  status")
    for name, passed, failed, skipped, seconds, ok, code in rows:
        status = "ok" if ok else f"FAILED (exit {code})"
        print(f"{name:<16}{passed:>8}{failed:>8}{skipped:>9}{seconds:>10.1f}  {status}")
    total_passed = sum(r[1] for r in rows)
    total_failed = sum(r[2] for r in rows) + sum(1 for r in rows if not r[5] and r[2] == 0)
    total_skipped = sum(r[3] for r in rows)
    print("=" * 64)
    print(f"{total_passed} passed, {total_failed} failed, {total_skipped} skipped")
    return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
