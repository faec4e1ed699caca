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
    def broken(name, on_row=None):
        raise RuntimeError("kernel table unreadable")

    monkeypatch.setattr("zoo_attention._cli.verify", broken)
    assert main(["verify", "xla"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip() == "zoo-attention verify: failed: RuntimeError: kernel table unreadable"


class _Everywhere(zoo_attention.AttentionKernel):
    """Serves any call when named, but only CPU's default order picks it."""

    name = "everywhere_for_test"
    priority = 1
    platforms = ("cpu",)

    def check(self, spec):
        return None

    def __call__(self, query, key, value, segment_ids, spec):
        return query


def test_listing_says_where_a_kernel_serves_and_where_it_is_the_default():
    zoo_attention.register_kernel(_Everywhere(), replace=True)
    try:
        rows = {r["name"]: r for r in zoo_attention.kernel_rows()}
    finally:
        zoo_attention.unregister_kernel("everywhere_for_test")
    assert rows["everywhere_for_test"]["serves on"] == "cpu,gpu,tpu"  # it was listed as cpu
    assert rows["everywhere_for_test"]["default on"] == "cpu"
    assert (rows["xla"]["serves on"], rows["xla"]["default on"]) == ("cpu,gpu,tpu", "fallback")


class _Asked(_Everywhere):
    """Records the platform and device kind of every call it is asked about."""

    name = "asked_for_test"

    def __init__(self):
        self.asked = []

    def check(self, spec):
        self.asked.append((spec.platform, spec.device_kind))
        return None


def test_other_platforms_are_asked_without_this_machines_device_kind():
    # A TPU kernel asked about "a TPU of kind 'cpu'" warned that it knew no such chip.
    kernel = _Asked()
    zoo_attention.register_kernel(kernel, replace=True)
    try:
        zoo_attention.kernel_rows()
    finally:
        zoo_attention.unregister_kernel("asked_for_test")
    here = zoo_attention.find_target().platform
    assert {kind for platform, kind in kernel.asked if platform != here} == {None}
    assert any(platform == here and kind is not None for platform, kind in kernel.asked)


def test_verify_reports_each_check_as_it_finishes(monkeypatch, capsys):
    import zoo_attention.testing as t

    events = []
    run_case = t.run_case

    def traced(name, case):
        events.append(f"run {case.name}")
        return run_case(name, case)

    monkeypatch.setattr(t, "CASES", t.CASES[:2])
    monkeypatch.setattr(t, "run_case", traced)
    rows, failed = zoo_attention.verify("xla", on_row=lambda r: events.append(f"row {r['case']}"))
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
