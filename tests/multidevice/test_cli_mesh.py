"""``zoo train --mesh`` on 8 devices: the loss curve of the one-device run, checkpoints that
restore on 1 and 4 devices (and resume on one, reporting the change), and one-sentence errors
for meshes, batches and head counts that cannot work."""

from __future__ import annotations

import pathlib
import shutil

import equinox as eqx
import jax
import numpy as np
import pytest
from mesh_helpers import corpus as _corpus
from mesh_helpers import losses as _losses

import zoo_train
from zoo_train import parallel
from zoo_train.cli import main

STEPS = 6
EXPERTS = "fsdp=2,expert=4"  # 4 expert shards
ARGS = [
    "--model", "llama-tiny", "--steps", str(STEPS), "--batch-size", "8", "--seq-len", "64",
    "--lr", "1e-2", "--log-every", "1", "--save-every", "3", "--eval-every", "0",
    "--sample-tokens", "0", "--seed", "3", "--no-progress",
    "--set", "optimizer.warmup_steps=2",
]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, one_device_zoo) -> dict[str, pathlib.Path]:
    tmp = tmp_path_factory.mktemp("mesh")
    data = _corpus(tmp / "data")
    eight, one = tmp / "eight", tmp / "one"
    code = main(["train", *ARGS, "--data", str(data), "--out", str(eight),
                 "--mesh", "data=2,fsdp=2,tensor=2"])  # fmt: skip
    assert code == 0
    proc = one_device_zoo("train", *ARGS, "--data", str(data), "--out", str(one), cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"eight": eight, "one": one, "data": data, "tmp": tmp}


def test_loss_curve_matches_the_one_device_run(runs):
    eight, one = _losses(runs["eight"]), _losses(runs["one"])
    assert sorted(eight) == sorted(one) == list(range(1, STEPS + 1))
    np.testing.assert_allclose([eight[s] for s in eight], [one[s] for s in eight], rtol=1e-4)
    assert eight[STEPS] < eight[1]  # it trains
    meta = zoo_train.Checkpointer(runs["eight"] / "checkpoints", async_save=False)
    try:
        recorded = meta.read_meta(STEPS)["mesh"]
    finally:
        meta.close()
    assert recorded["axes"] == {"data": 2, "fsdp": 2, "tensor": 2}
    assert recorded["devices"] == 8


@pytest.mark.parametrize(("shape", "devices"), [((1, 1, 1), 1), ((1, 2, 2), 4)], ids=str)
def test_checkpoint_restores_on_fewer_devices(runs, shape, devices):
    def arrays(loaded):
        return [np.asarray(x) for x in jax.tree.leaves(eqx.filter(loaded.model, eqx.is_array))]

    full = zoo_train.load_run(runs["eight"])
    mesh = parallel.make_mesh(parallel.MeshConfig(*shape), jax.devices()[:devices])
    part = zoo_train.load_run(runs["eight"], mesh=mesh)
    assert part.step == full.step == STEPS
    leaves = jax.tree.leaves(eqx.filter(part.model, eqx.is_array))
    assert {d for x in leaves for d in x.sharding.device_set} == set(jax.devices()[:devices])
    for a, b in zip(arrays(part), arrays(full), strict=True):
        np.testing.assert_array_equal(a, b)


def test_resume_on_one_device_reports_the_mesh_change(runs, one_device_zoo):
    resumed = runs["tmp"] / "resumed"
    shutil.copytree(runs["eight"], resumed)
    shutil.rmtree(resumed / "checkpoints" / str(STEPS))
    proc = one_device_zoo(
        "train", *ARGS, "--data", str(runs["data"]), "--out", str(resumed), cwd=runs["tmp"]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "the mesh changed since checkpoint 3: data=2 fsdp=2 tensor=2 (8 devices) → "
        "data=1 fsdp=1 tensor=1 (1 device)" in proc.stderr
    )
    got, want = _losses(resumed), _losses(runs["eight"])
    np.testing.assert_allclose([got[s] for s in (4, 5, 6)], [want[s] for s in (4, 5, 6)], rtol=1e-4)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--mesh", "data=3"], "the fixed axes take 3, which does not divide 8"),
        (["--mesh", "data=2,fsdp=2,tensor=1"], "needs 4 devices but 8 are available"),
        (["--mesh", "fsdp=-1,tensor=-1"], "most one mesh axis may be -1"),
        (
            ["--mesh", "pipeline=2"],
            "expected NAME=SIZE items with NAME in data, fsdp, expert, context, tensor",
        ),
        (["--mesh", "tensor=4"], "the model has 2 key/value heads"),
        (["--batch-size", "6"], "--batch-size 6 cannot be split over the 8 data-parallel shards"),
        (["--set", "sharding.embed=pipeline"], "names mesh axis 'pipeline'"),
        (
            ["--model", "mixtral-tiny", "--set", "model_config.n_experts=6", "--mesh", EXPERTS],
            "Expert parallelism over 4 devices (expert=4) needs the experts split evenly, but "
            "the model has 6 experts a layer",
        ),
    ],
    ids=[
        "not-dividing",
        "wrong-count",
        "two-auto",
        "unknown-axis",
        "tensor-kv",
        "batch",
        "rule",
        "experts",
    ],
)
def test_bad_meshes_are_one_sentence_usage_errors(args, needle, tmp_path, capsys):
    data = _corpus(tmp_path / "data")
    code = main(["train", "--data", str(data), "--out", str(tmp_path / "run"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.endswith("."), err
    assert needle in err, err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_eval_and_generate_take_a_mesh(runs, capsys):
    assert main(["eval", str(runs["eight"]), "--data", str(runs["data"]), "--seq-len", "64",
                 "--batch-size", "8", "--json", "--mesh", "data=2,fsdp=4"]) == 0  # fmt: skip
    assert "loss" in capsys.readouterr().out
    assert main(["generate", str(runs["eight"]), "--max-new-tokens", "8", "--greedy",
                 "--prompt", "def", "--mesh", "data=2,fsdp=2,tensor=2"]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith("def")
    assert main(["generate", str(runs["eight"]), "--mesh", "fsdp=2,tensor=4"]) == 2
    assert "the model has 2 key/value heads" in capsys.readouterr().err


def test_lora_finetune_and_convert_on_a_mesh(runs, capsys):
    tuned, exported = runs["tmp"] / "lora", runs["tmp"] / "hf"
    code = main(["finetune", "--from-run", str(runs["eight"]), "--data", str(runs["data"]),
                 "--out", str(tuned), "--steps", "2", "--batch-size", "8", "--seq-len", "64",
                 "--lora-rank", "4", "--eval-every", "0", "--no-progress",
                 "--mesh", "data=2,fsdp=2,tensor=2"])  # fmt: skip
    assert code == 0, capsys.readouterr().err[-2000:]
    loaded = zoo_train.load_run(tuned)
    assert loaded.lora is not None and loaded.step == 2
    a = loaded.model.stack.blocks[0].attn.q_proj.lora_a  # [L, r, D]: D over fsdp
    assert a.sharding.spec == jax.sharding.PartitionSpec(None, None, "fsdp")
    assert main(["convert", str(tuned), str(exported), "--mesh", "fsdp=8"]) == 0
    assert (exported / "model.safetensors").is_file()
