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
        "from zoo_attention._cli import verify\n"
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
    def broken(name):
        raise RuntimeError("kernel table unreadable")

    monkeypatch.setattr("zoo_attention._cli.verify", broken)
    assert main(["verify", "xla"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == "zoo-attention verify: failed: RuntimeError: kernel table unreadable"
