"""``zoo compile --max-seq-len``: the longest ``1024 * 2**k`` tokens a row whose train step fits,
found by compiles for a TPU topology (``.venv-tpu``, as ``test_compile_cli`` runs it), with and
without a ``context`` axis; and the search itself against memory models."""

from __future__ import annotations

import dataclasses
import json

import pytest
from test_compile_cli import _tpu_python, _zoo

from zoo_train.aot import StepMemory, StepReport, max_seq_len, snap_length

# llama-tiny with `xla` attention: the [T, T] scores make the peak grow with T squared, so a
# v5e chip's 15.75 GiB runs out within a few doublings (each compile takes 5-30 s).
ARGS = ["--topology", "v5e:2x2", "--model", "llama-tiny", "--set", "attention.implementation=xla"]
RUNS = {
    "fsdp": [*ARGS, "--batch-size", "4", "--seq-len", "8192"],
    "context": [*ARGS, "--batch-size", "1", "--seq-len", "16384", "--mesh", "fsdp=1,context=4"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    """The searches' results, each run when a test first asks for it."""
    tmp = tmp_path_factory.mktemp("seq-len")
    python = _tpu_python()
    done: dict[str, tuple[int, str, dict]] = {}

    def run(name: str, *extra: str, search: bool = True) -> tuple[int, str, dict]:
        if name not in done:
            args = [*RUNS[name.split("@")[0]], *extra, *(["--max-seq-len"] if search else [])]
            proc = _zoo(python, *args, "--json", str(tmp / f"{name}.json"), cwd=tmp)
            assert proc.returncode in (0, 3), proc.stderr[-3000:]
            report = json.loads((tmp / f"{name}.json").read_text())
            done[name] = (proc.returncode, proc.stdout, report)
        return done[name]

    return run


@pytest.mark.parametrize(
    "name",
    # the search on a plain mesh: [context] runs the same search (and its other mesh axis)
    [pytest.param("fsdp", marks=pytest.mark.full), "context"],
)
def test_the_longest_length_compiles_and_the_next_power_of_two_does_not_fit(runs, name):
    code, stdout, report = runs(name)
    best = report["max_seq_len"]
    tried = {r["seq_len"]: r["fits"] for r in report["seq_search"]}
    assert code == 0 and best >= 1024 and best == snap_length(best)
    assert tried[best] is True and tried[2 * best] is False
    assert all(fits == (n <= best) for n, fits in tried.items())
    assert report["seq_len"] == best and report["fits"] is True
    assert f"longest sequence that fits: {best} tokens" in stdout


def test_a_context_axis_splits_the_sequence_and_gathers_keys_and_values(runs):
    _, stdout, report = runs("context")
    assert report["mesh"] == {"data": 1, "fsdp": 1, "context": 4, "tensor": 1}
    assert report["collectives"]["all-gather"] > 0 and report["all_gather_bytes"] > 0
    assert "all-gathers:" in stdout
    # One row split four ways holds a longer sequence than one row a device: four rows of the
    # longest length over fsdp do not fit (one compile, where the fsdp search takes two).
    best = report["max_seq_len"]
    code, stdout, fsdp = runs(f"fsdp@{best}", "--seq-len", str(best), search=False)
    assert code == 3 and fsdp["fits"] is False and "does not fit" in stdout, stdout
    assert fsdp["mesh"] == {"data": 1, "fsdp": 4, "tensor": 1} and fsdp["seq_len"] == best


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What the search reads of a step: its length, which it replaces."""

    seq_len: int = 0


@pytest.mark.parametrize(("start", "longest"), [(1024, 8192), (65536, 8192), (4096, 1 << 17)])
def test_the_search_doubles_or_halves_to_the_longest_that_fits(monkeypatch, start, longest):
    hbm = 1000

    def fake(setup, batch_size, *, on_compile=None):
        used = hbm if setup.seq_len <= longest else hbm + 1
        return StepReport(batch_size, StepMemory(1, 1, 1, 1, used, hbm), 0.0, [], 0)

    monkeypatch.setattr("zoo_train.aot._seq_len.compile_step", fake)

    best, reports = max_seq_len(_Setup(), 4, start=start, limit=1 << 17)  # type: ignore[arg-type]
    assert best == longest
    assert reports[best].fits and (2 * best not in reports or not reports[2 * best].fits)
    assert all(r.fits == (n <= longest) for n, r in reports.items())
