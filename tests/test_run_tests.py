"""``make test``'s runner shows how far each running suite is while it runs."""

from __future__ import annotations

import json

import run_tests  # scripts/, on the path by conftest.py

SUITE = """
import time


def test_one():
    time.sleep(0.6)


def test_two():
    time.sleep(0.6)
    assert False


def test_three():
    time.sleep(0.6)
"""


def test_running_suites_report_tests_done_out_of_their_total(tmp_path, monkeypatch, capsys):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_slow.py").write_text(SUITE)
    monkeypatch.setattr(run_tests, "SUITES", {"slow": (str(tmp_path / "suite"), [], {})})
    monkeypatch.setattr(run_tests, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(run_tests, "CACHE", tmp_path / "reports" / "cache")
    monkeypatch.setattr(run_tests, "PROGRESS_EVERY", 0.25)
    assert run_tests.main(["slow"]) == 1  # one test fails
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "running: slow " in line]
    assert any("/3" in line for line in lines), out  # done out of the total, while it ran
    progress = json.loads((tmp_path / "reports" / "slow.progress").read_text())
    assert progress == {"done": 3, "total": 3, "failed": 1}
    assert "1 passed" not in out.splitlines()[-1] and "2 passed, 1 failed" in out
