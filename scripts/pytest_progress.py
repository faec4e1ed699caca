"""A pytest plugin that keeps a suite's progress in a file, for ``scripts/run_tests.py``.

Loaded with ``-p pytest_progress`` when ``ZOO_TEST_PROGRESS`` names the file: after collection
and after each test it rewrites the file with ``{"done", "total", "failed"}`` (written beside,
then renamed, so a reader never sees half a file). With ``ZOO_TEST_CPU`` naming a file, it also
writes each test's CPU seconds there (its process's and its finished subprocesses', setup and
teardown included): unlike wall time, they hardly change with the machine's load.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

_state = {"done": 0, "total": 0, "failed": 0, "deselected": 0}
_cpu: dict[str, float] = {}


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Generator[None, None, None]:
    start = _cpu_seconds()
    yield
    _cpu[item.nodeid] = _cpu_seconds() - start


def pytest_sessionfinish(session: Any) -> None:
    target = os.environ.get("ZOO_TEST_CPU")
    if target:
        Path(target).write_text(json.dumps(_cpu, indent=0))


def _write() -> None:
    target = os.environ.get("ZOO_TEST_PROGRESS")
    if not target:
        return
    path = Path(target)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_state))
    os.replace(tmp, path)


def pytest_deselected(items: list[Any]) -> None:
    _state["deselected"] += len(items)


def pytest_collection_finish(session: Any) -> None:
    _state["total"] = len(session.items)
    _write()


def pytest_runtest_logreport(report: Any) -> None:
    # A test is done after its call, or at a setup that failed or skipped it.
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _state["done"] += 1
        _state["failed"] += int(report.failed)
        _write()
    elif report.when == "teardown" and report.failed:
        _state["failed"] += 1
        _write()
