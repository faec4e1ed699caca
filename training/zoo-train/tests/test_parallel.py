"""Mesh and sharding settings: parsing, checks, rules, the config file and one-device layout.

(Meshes of several devices are tested in tests/multidevice, on eight fake CPU devices.)"""

from __future__ import annotations

import pathlib

import equinox as eqx
import jax
import pytest
from jax.sharding import PartitionSpec as P
from tiny_lm import loaders, make_model

import zoo_train
from zoo_train import OptimizerConfig, TrainConfig, UsageError, parallel
from zoo_train.settings import resolve_settings


@pytest.mark.parametrize(
    ("text", "devices", "want"),
    [
        (
            "data=1,fsdp=-1,tensor=1",
            8,
            {"data": 1, "fsdp": 8, "expert": 1, "context": 1, "tensor": 1},
        ),
        ("tensor=2", 8, {"data": 1, "fsdp": 4, "expert": 1, "context": 1, "tensor": 2}),
        (
            "data=2,fsdp=2,tensor=2",
            8,
            {"data": 2, "fsdp": 2, "expert": 1, "context": 1, "tensor": 2},
        ),
        ("data=-1,fsdp=1", 4, {"data": 4, "fsdp": 1, "expert": 1, "context": 1, "tensor": 1}),
        ("", 1, {"data": 1, "fsdp": 1, "expert": 1, "context": 1, "tensor": 1}),
        ("fsdp=2,expert=-1", 8, {"data": 1, "fsdp": 2, "expert": 4, "context": 1, "tensor": 1}),
        ("fsdp=2,context=4", 8, {"data": 1, "fsdp": 2, "expert": 1, "context": 4, "tensor": 1}),
    ],
)
def test_mesh_sizes_resolve_against_the_device_count(text, devices, want):
    assert parallel.MeshConfig.parse(text).resolve(devices) == want


@pytest.mark.parametrize(
    ("text", "devices", "needle"),
    [
        ("data=3", 8, "the fixed axes take 3, which does not divide 8"),
        ("data=2,fsdp=2,tensor=1", 8, "needs 4 devices but 8 are available"),
        ("fsdp=-1,tensor=-1", 8, "at most one mesh axis may be -1"),
        ("data=0", 8, "must be a positive integer or -1"),
        ("pipeline=2", 8, "expected NAME=SIZE items"),
        ("data=two", 8, "must be an integer"),
    ],
)
def test_bad_meshes_name_the_numbers(text, devices, needle):
    with pytest.raises(ValueError, match=needle):
        parallel.MeshConfig.parse(text).resolve(devices)


def test_rules_override_the_table_and_refuse_unknown_mesh_axes():
    rules = parallel.make_rules({"embed": None, "batch": ["data"], "my_axis": "tensor"})
    assert rules["embed"] is None and rules["batch"] == "data" and rules["my_axis"] == "tensor"
    assert rules["mlp"] == parallel.DEFAULT_RULES["mlp"]
    with pytest.raises(ValueError, match="names mesh axis 'pipe'"):
        parallel.make_rules({"heads": "pipe"})


def test_batch_and_head_checks_name_the_numbers():
    mesh = parallel.make_mesh()  # one device here: everything divides
    rules = parallel.make_rules()
    parallel.check_batch(3, mesh, rules)
    parallel.check_heads(4, 1, mesh, rules)


def test_mesh_and_sharding_settings_from_file_set_and_flag(tmp_path: pathlib.Path):
    (tmp_path / "run.toml").write_text(
        "[mesh]\ndata = 2\nfsdp = -1\n\n[sharding]\nembed = 'data'\nvocab = ['fsdp', 'tensor']\n"
    )
    s = resolve_settings(
        command="train",
        config_file=str(tmp_path / "run.toml"),
        assignments=["sharding.mlp=none", "mesh.tensor=2"],
        flags={},
    )
    assert s.mesh_text == "data=2,fsdp=-1,tensor=2"
    assert s.sharding == {"embed": "data", "vocab": ["fsdp", "tensor"], "mlp": None}
    flagged = resolve_settings(
        command="train", config_file=None, assignments=[], flags={"mesh": "fsdp=4,tensor=2"}
    )
    assert flagged.mesh_text == "data=1,fsdp=4,tensor=2"
    with pytest.raises(UsageError, match="expected NAME=SIZE"):
        resolve_settings(command="train", config_file=None, assignments=[], flags={"mesh": "x"})


def test_train_config_records_the_mesh_and_old_records_still_load():
    config = TrainConfig(mesh=parallel.MeshConfig(data=2, fsdp=-1), sharding={"embed": None})
    again = TrainConfig.from_dict(config.to_dict())
    assert again == config
    old = config.to_dict()
    del old["mesh"], old["sharding"]
    assert TrainConfig.from_dict(old).mesh == parallel.MeshConfig()


def test_one_device_layout_is_unsharded_and_the_step_compiles_once():
    # The default mesh on one device: every array whole, as before meshes existed.
    model = make_model(0)
    optimizer, schedule = zoo_train.make_optimizer(OptimizerConfig(), 10, model)
    state = zoo_train.init_train_state(model, optimizer)
    mesh = parallel.make_mesh()
    shardings = parallel.state_shardings(state, optimizer, mesh, parallel.make_rules())
    specs = {s.spec for s in jax.tree.leaves(shardings)}
    assert specs == {P()}
    assert len(jax.tree.leaves(shardings)) == len(jax.tree.leaves(eqx.filter(state, eqx.is_array)))
    step = zoo_train.make_train_step(
        optimizer, zoo_train.make_lm_loss(), schedule, mesh=mesh, rules=parallel.make_rules()
    )
    batch = loaders(0)[0].next_batch(4)
    # As the loop does: the state made in its layout, so the step's output matches its input.
    state = parallel.init_sharded(lambda s: s, state, mesh=mesh, shardings=shardings)
    state, _ = step(batch, state)
    state, _ = step(batch, state)
    assert step.compilations() == 1
