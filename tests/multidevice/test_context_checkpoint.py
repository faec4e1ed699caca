"""A run trained with ``context=4`` in its mesh: its checkpoint resumes on one device and on
``fsdp=4`` with the next losses of the run that went on, and a sequence the context axis cannot
split is a one-sentence usage error."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest
from mesh_helpers import corpus, losses, zoo_process

from zoo_train.cli import main

STEPS = 4
ARGS = [
    "--model", "llama-tiny", "--steps", str(STEPS), "--batch-size", "4", "--seq-len", "64",
    "--lr", "1e-2", "--log-every", "1", "--save-every", "2", "--eval-every", "0",
    "--sample-tokens", "0", "--seed", "5", "--no-progress",
    "--set", "optimizer.warmup_steps=1",
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    tmp = tmp_path_factory.mktemp("context")
    data = corpus(tmp / "data", files=6, seed=None)
    out = tmp / "context"
    code = main(["train", *ARGS, "--data", str(data), "--out", str(out),
                 "--mesh", "fsdp=2,context=4"])  # fmt: skip
    assert code == 0
    return {"out": out, "data": data, "tmp": tmp}


@pytest.mark.parametrize(
    ("devices", "mesh"),
    [
        pytest.param(1, None, id="one"),
        # A context run's checkpoint resumed on another mesh: kept in [one].
        pytest.param(4, "fsdp=4", id="fsdp4", marks=pytest.mark.full),
    ],
)
def test_a_context_checkpoint_resumes_with_the_same_next_losses(run, devices, mesh):
    resumed = run["tmp"] / f"resumed-{devices}"
    shutil.copytree(run["out"], resumed)
    shutil.rmtree(resumed / "checkpoints" / str(STEPS))
    extra = [] if mesh is None else ["--mesh", mesh]
    proc = zoo_process(
        devices, "train", *ARGS, "--data", str(run["data"]), "--out", str(resumed), *extra,
        cwd=run["tmp"],
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "the mesh changed since checkpoint 2: data=1 fsdp=2 context=4 tensor=1" in proc.stderr
    got, want = losses(resumed), losses(run["out"])
    np.testing.assert_allclose([got[s] for s in (3, 4)], [want[s] for s in (3, 4)], rtol=1e-4)


def test_a_sequence_the_context_axis_cannot_split_is_a_usage_error(run, capsys):
    code = main(["train", *ARGS, "--seq-len", "60", "--data", str(run["data"]),
                 "--out", str(run["tmp"] / "bad"), "--mesh", "fsdp=2,context=4"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "--seq-len 60 cannot be split over the 4 context-parallel shards" in err, err
