"""``make test``'s runner shows how far each running suite is while it runs."""

from __future__ import annotations

import json
import sys

import newest_python  # scripts/, on the path by conftest.py
import run_tests

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
    assert progress == {"done": 3, "total": 3, "failed": 1, "deselected": 0}
    assert "1 passed" not in out.splitlines()[-1] and "2 passed, 1 failed" in out


def _one_suite(tmp_path, monkeypatch) -> None:
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_quick.py").write_text("def test_quick():\n    pass\n")
    monkeypatch.setattr(run_tests, "SUITES", {"quick": (str(tmp_path / "suite"), [], {})})
    monkeypatch.setattr(run_tests, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(run_tests, "CACHE", tmp_path / "reports" / "cache")


def test_a_missing_newest_leg_is_said_in_the_summary_never_passed_over(
    tmp_path, monkeypatch, capsys
):
    _one_suite(tmp_path, monkeypatch)
    missing = run_tests.Leg("newest JAX", str(tmp_path / "no-venv" / "bin" / "python"), "newest-")
    monkeypatch.setattr(run_tests, "NEWEST", missing)
    monkeypatch.setenv("ZOO_NEWEST_PYTHON", str(tmp_path / "no-python"))
    assert run_tests.main(["--with-newest", "quick"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3].startswith("newest-JAX leg did not run: no Python 3.12 or 3.13"), out
    # Asked for alone, the leg's absence fails.
    assert run_tests.main(["--newest", "quick"]) == 1
    assert "the newest-JAX leg cannot run" in capsys.readouterr().err


def test_the_newest_leg_runs_its_suites_on_its_own_interpreter(tmp_path, monkeypatch, capsys):
    _one_suite(tmp_path, monkeypatch)
    # This interpreter stands in for the newest one: the suite runs on both legs, one summary.
    leg = run_tests.Leg(
        "newest JAX", sys.executable, "newest-", (("ZOO_TPU_PYTHON", sys.executable),)
    )
    monkeypatch.setattr(run_tests, "NEWEST", leg)
    monkeypatch.setattr(run_tests, "NEWEST_LEG", ("quick",))
    assert run_tests.main(["--with-newest", "quick"]) == 0
    out = capsys.readouterr().out
    assert "quick [newest JAX]" in out and (tmp_path / "reports" / "newest-quick.xml").exists()
    assert out.splitlines()[-1].startswith("2 passed, 0 failed")


def test_the_newest_interpreter_is_found_by_running_it(tmp_path, monkeypatch):
    fake = tmp_path / "python3.12"
    fake.write_text("#!/bin/sh\necho 3.12\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ZOO_NEWEST_PYTHON", str(fake))
    assert newest_python.find() == str(fake)
    fake.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    assert newest_python.find() is None


CPU_SUITE = """
import time


def test_burns():
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass


def test_sleeps():
    time.sleep(0.5)
"""


def test_each_suite_and_test_reports_its_cpu_seconds_apart_from_its_wall_time(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_cpu.py").write_text(CPU_SUITE)
    monkeypatch.setattr(run_tests, "SUITES", {"cpu": (str(tmp_path / "suite"), [], {})})
    monkeypatch.setattr(run_tests, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(run_tests, "CACHE", tmp_path / "reports" / "cache")
    assert run_tests.main(["cpu"]) == 0
    per_test = json.loads((tmp_path / "reports" / "cpu.cpu.json").read_text())
    by_name = {nodeid.rsplit("::", 1)[-1]: seconds for nodeid, seconds in per_test.items()}
    assert by_name["test_burns"] >= 0.5 and by_name["test_sleeps"] < 0.25, by_name
    last = capsys.readouterr().out.splitlines()[-1]
    wall, cpu = (float(last.split(" s wall, ")[0].split()[-1]), float(last.split()[-3]))
    assert cpu >= 0.5 and "CPU seconds" in last and wall >= 1.0, last


FULL_SUITE = """
import pytest


def test_short():
    pass


@pytest.mark.full
def test_long_repeat():
    pass
"""


def test_make_test_leaves_the_full_cases_out_and_says_so_test_full_runs_them(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "test_marked.py").write_text(FULL_SUITE)
    monkeypatch.setattr(run_tests, "SUITES", {"marked": (str(tmp_path / "suite"), [], {})})
    monkeypatch.setattr(run_tests, "REPORTS", tmp_path / "reports")
    monkeypatch.setattr(run_tests, "CACHE", tmp_path / "reports" / "cache")
    assert run_tests.main(["marked"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("1 passed, 0 failed"), out
    assert out[-3].startswith("1 long cases marked `full` left out"), out
    assert run_tests.main(["--full", "marked"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("2 passed, 0 failed") and "left out" not in out[-3], out
