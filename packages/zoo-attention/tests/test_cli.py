import subprocess
import sys

import zoo_attention
from zoo_attention._cli import main


def test_kernels_lists_xla_with_versions_and_serving(capsys):
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("xla "))
    assert zoo_attention.get_kernel("xla").version in line
    assert zoo_attention.CONTRACT_VERSION in line and "yes" in line


def test_verify_unknown_kernel_exits_2(capsys):
    assert main(["verify", "no_such_kernel"]) == 2
    assert "unknown kernel" in capsys.readouterr().err


def test_module_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "zoo_attention", "kernels"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "xla" in proc.stdout


def test_verify_needs_no_pytest():
    # `import pytest` fails in this child, as in an environment of zoo wheels alone.
    code = (
        "import sys; sys.modules['pytest'] = None\n"
        "import zoo_attention.testing as t\n"
        "from zoo_attention.testing import verify\n"
        "assert t.CASES and t.run_case\n"
        "try:\n"
        "    t.ConformanceSuite\n"
        "except ImportError:\n"
        "    print('suite needs pytest')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "suite needs pytest"


def test_unexpected_error_is_one_line_without_traceback(monkeypatch, capsys):
    def broken(name, on_row=None):
        raise RuntimeError("kernel table unreadable")

    monkeypatch.setattr("zoo_attention.testing.verify", broken)
    assert main(["verify", "xla"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == "zoo-attention verify: failed: RuntimeError: kernel table unreadable"


def test_verify_reports_each_check_as_it_finishes(monkeypatch, capsys):
    import zoo_attention.testing as t
    from zoo_attention.testing import _check

    events = []
    run_case = t.run_case

    def traced(name, case):
        events.append(f"run {case.name}")
        return run_case(name, case)

    monkeypatch.setattr(t, "CASES", t.CASES[:2])  # the public name verify reads when called
    monkeypatch.setattr(_check, "run_case", traced)
    rows, failed = t.verify("xla", on_row=lambda r: events.append(f"row {r['case']}"))
    first, second = t.CASES[0].name, t.CASES[1].name
    assert events == [f"run {first}", f"row {first}", f"run {second}", f"row {second}",
                      "row named-scope"]  # fmt: skip
    assert failed == 0 and len(rows) == 3
    assert main(["verify", "xla"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "verifying xla: 3 checks"  # said up front
    assert [line.split()[:2] for line in out[1:4]] == [
        ["1/3", "pass"],
        ["2/3", "pass"],
        ["3/3", "pass"],
    ]
    assert out[-1] == "3 passed, 0 failed"
