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
