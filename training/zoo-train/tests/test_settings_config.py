"""The run config and the command line's settings: one declaration, one default, one check.

Every field of ``TrainConfig`` (and its optimizer and mesh) is reached from the settings under
the key users' files and ``--set`` name, a value set there arrives in the config, the defaults
of both sides are one, a bad value is refused in the same words by both, and a run recorded by
0.9.0 reads back as the same run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import random
import secrets
import subprocess
import sys
from typing import Any

import pytest

from zoo_train import OptimizerConfig, TrainConfig, UsageError
from zoo_train.settings import RunSettings, flat, keys, resolve_settings

# Each field of TrainConfig (dotted as to_dict nests it) -> the settings key that sets it, as
# config files and --set have named it since 0.9.0 (on_nonfinite, async_checkpointing, plot and
# optimizer.decay_mask are new keys; the rest are 0.9.0's). A field renamed on either side
# breaks this table.
REACHED = {
    "steps": "steps",
    "batch_size": "batch_size",
    "grad_accum": "grad_accum",
    "z_loss": "z_loss",
    "router_aux_loss": "router_aux_loss",
    "router_z_loss": "router_z_loss",
    "compute_dtype": "compute_dtype",
    "seed": "seed",
    "on_nonfinite": "on_nonfinite",
    "log_every": "log_every",
    "eval_every": "eval_every",
    "eval_batches": "eval_batches",
    "checkpoint_every": "save_every",
    "keep": "keep",
    "async_checkpointing": "async_checkpointing",
    "progress": "progress",
    "plot": "plot",
    "profile": "profile",
    "sharding": "sharding",
    "mesh.data": "mesh.data",
    "mesh.fsdp": "mesh.fsdp",
    "mesh.tensor": "mesh.tensor",
    "mesh.expert": "mesh.expert",
    "mesh.context": "mesh.context",
    "optimizer.lr": "lr",
    "optimizer.warmup_steps": "optimizer.warmup_steps",
    **{
        f"optimizer.{name}": f"optimizer.{name}"
        for name in (
            "name",
            "schedule",
            "min_lr_ratio",
            "weight_decay",
            "decay_mask",
            "b1",
            "b2",
            "eps",
            "momentum",
            "clip_norm",
        )
    },
}

# What `zoo train` with no arguments (`make train`) ran in 0.9.0: its TrainConfig as the
# checkpoints recorded it, and its settings as metrics.jsonl's start record holds them.
MAKE_TRAIN_CONFIG_0_9_0 = json.loads(
    '{"steps": 800, "batch_size": 16, "grad_accum": 1, "optimizer": {"name": "adamw", "lr": '
    '0.002, "warmup_steps": 100, "schedule": "cosine", "min_lr_ratio": 0.1, "weight_decay": '
    '0.1, "decay_mask": "default", "b1": 0.9, "b2": 0.95, "eps": 1e-08, "momentum": 0.9, '
    '"clip_norm": 1.0}, "z_loss": 0.0, "compute_dtype": "auto", "seed": 0, "on_nonfinite": '
    '"stop", "log_every": 10, "eval_every": 100, "eval_batches": 8, "checkpoint_every": 100, '
    '"keep": 3, "async_checkpointing": true, "progress": true, "plot": true, "mesh": {"data": '
    '1, "fsdp": -1, "tensor": 1, "expert": 1}, "sharding": {}, "profile": null}'
)
MAKE_TRAIN_SETTINGS_0_9_0 = json.loads(
    '{"model": "llama-tiny", "data": [], "eval_data": [], "data_weights": [], "data_cache": '
    'null, "tokenizer": null, "out": "runs/default", "steps": 800, "epochs": null, '
    '"batch_size": 16, "seq_len": 128, "grad_accum": 1, "stop_at": null, "save_every": 100, '
    '"lr": 0.002, "eval_every": 100, "eval_batches": 8, "log_every": 10, "keep": 3, "seed": 0, '
    '"val_fraction": 0.05, "text_field": "text", "max_bytes": 3000000, "compute_dtype": '
    '"auto", "z_loss": 0.0, "router_aux_loss": null, "router_z_loss": 0.0, "progress": true, '
    '"profile": null, "trackers": ["jsonl", "tensorboard"], "sample_tokens": 300, "prompt": '
    '"def ", "temperature": 0.8, "optimizer.name": "adamw", "optimizer.warmup_steps": null, '
    '"optimizer.warmup_fraction": 0.125, "optimizer.schedule": "cosine", '
    '"optimizer.min_lr_ratio": 0.1, "optimizer.weight_decay": 0.1, "optimizer.b1": 0.9, '
    '"optimizer.b2": 0.95, "optimizer.eps": 1e-08, "optimizer.momentum": 0.9, '
    '"optimizer.clip_norm": 1.0, "mesh.data": 1, "mesh.fsdp": -1, "mesh.tensor": 1, '
    '"mesh.expert": 1, "attention.implementation": null, "attention.require": null, '
    '"wandb.project": "zoo", "wandb.name": null, "wandb.tags": []}'
)


def _leaves(config: Any, prefix: str = "") -> dict[str, Any]:
    """The fields of a config, nested configs' fields dotted (``optimizer.lr``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_leaves(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def test_every_config_field_has_its_settings_key():
    assert set(_leaves(TrainConfig())) == set(REACHED)
    known = keys(RunSettings())
    assert {key for key in REACHED.values() if key not in ("sharding",)} <= set(known)


def test_the_command_line_and_the_library_have_one_default():
    steps, fraction = 800, 0.125  # what `make train` runs, its warm-up a fraction of the run
    warmup = min(max(math.ceil(fraction * steps), 10), steps // 2)
    own = TrainConfig()
    want = dataclasses.replace(
        own, optimizer=dataclasses.replace(own.optimizer, warmup_steps=warmup)
    )
    assert RunSettings().train_config() == want
    # Each key's default, as the settings show it, is the config field's default.
    known = keys(RunSettings())
    for field, value in _leaves(TrainConfig()).items():
        key = REACHED[field]
        if key in ("sharding", "profile", "optimizer.warmup_steps"):
            continue  # a table, the window's text, the warm-up that follows from the run
        assert known[key].default == value, field


def _draw(rng: random.Random, key: Any) -> tuple[str, Any, Any]:
    """A value for ``key`` other than its default, within its declared range: the text for
    ``--set``, the value for a file, and what the config must then hold."""
    if key.name == "profile":
        start = rng.randint(1, 50)
        end = rng.randint(start, 60)
        return f"{start}:{end}", f"{start}:{end}", (start, end)
    if key.name.startswith("mesh."):  # a positive size (one axis only may be -1: fsdp's)
        size = rng.randint(2, 64)
        return str(size), size, size
    if key.name == "optimizer.warmup_steps":  # at most the run's length, or it is cut there
        w = rng.randint(0, RunSettings().steps)
        return str(w), w, w
    if key.choices is not None:
        choice = rng.choice([c for c in key.choices if c != key.default])
        return choice, choice, choice
    kind = key.kind.rstrip("?")
    if kind == "bool":
        return str(not key.default).lower(), not key.default, not key.default
    low, high = key.within.low, min(key.within.high, key.within.low + 1000)
    while True:
        value: Any = rng.randint(math.ceil(low), math.floor(high))
        if kind == "float":
            value = rng.uniform(low, high)
        if value != key.default and value in key.within:
            return repr(value), value, value


@pytest.mark.parametrize("source", ["--set", "file"])
def test_a_value_set_in_the_settings_arrives_in_the_config(tmp_path: pathlib.Path, source: str):
    seed = secrets.randbits(32)
    rng = random.Random(seed)
    known = keys(RunSettings())
    for field, key_name in REACHED.items():
        if key_name == "sharding":
            axis, mesh_axes = rng.choice(["embed", "vocab", "heads"]), rng.choice(["data", None])
            text, value, want = str(mesh_axes), mesh_axes, {axis: mesh_axes}
            key_name = f"sharding.{axis}"
        else:
            text, value, want = _draw(rng, known[key_name])
        if source == "--set":
            assignments, config_file = [f"{key_name}={text}"], None
        else:
            table, dot, name = key_name.partition(".")
            data = {table: {name: value}} if dot else {key_name: value}
            config_file = tmp_path / f"{field}.json"
            config_file.write_text(json.dumps(data))
        s = resolve_settings(
            command="train",
            config_file=None if config_file is None else str(config_file),
            assignments=assignments if config_file is None else [],
            flags={},
        )
        got = _leaves(s.train_config())[field]
        assert got == want, f"{field} from {key_name}={text!r} (seed {seed})"


def _outside(rng: random.Random, key: Any) -> Any:
    """A value outside ``key``'s range or choices."""
    if key.choices is not None:
        return rng.choice(key.choices) + rng.choice(["x", "-2", "_"])
    r = key.within
    if rng.random() < 0.5 or math.isinf(r.high):
        return r.low - rng.randint(1, 9) if r.low_closed else r.low - rng.choice([0, 1, 5])
    return r.high + rng.randint(1, 9) if r.high_closed else r.high + rng.choice([0, 1, 5])


def _config_with(field: str, value: Any) -> TrainConfig:
    """A config with ``field`` (``optimizer.b1`` for the optimizer's) set to ``value``."""
    _, dot, name = field.partition(".")
    if dot:
        return TrainConfig(optimizer=OptimizerConfig(**{name: value}))
    return TrainConfig(**{field: value})


def test_a_bad_value_is_refused_in_the_same_words_by_the_config_and_the_command_line():
    seed = secrets.randbits(32)
    rng = random.Random(seed)
    known = keys(RunSettings())
    for field, key_name in REACHED.items():
        key = known.get(key_name)
        if key is None or (key.within is None and key.choices is None):
            continue  # the mesh's axes check themselves (positive or -1), as below
        if key_name == "optimizer.warmup_steps":
            continue  # the command line's may be none; the config's is the count
        value = _outside(rng, key)
        if key.kind.rstrip("?") == "int" and not isinstance(value, str):
            value = int(value)
        with pytest.raises(ValueError, match=" must ") as library:
            _config_with(field, value)
        with pytest.raises(UsageError) as cli:
            resolve_settings(
                command="train", config_file=None, assignments=[f"{key_name}={value}"], flags={}
            )
        said, told = str(library.value), str(cli.value)
        assert told.startswith(f"Setting `{key_name}`"), told
        assert said.split(" must ", 1)[1] == told.split(" must ", 1)[1], (said, told, seed)
        assert said.startswith(f"`{field}` must "), said
    for axis in ("data", "tensor"):
        with pytest.raises(ValueError, match="positive integer or -1") as library:
            TrainConfig.from_dict({"mesh": {axis: 0}})
        with pytest.raises(UsageError) as cli:
            resolve_settings(
                command="train", config_file=None, assignments=[f"mesh.{axis}=0"], flags={}
            )
        assert str(cli.value) == str(library.value)[:1].upper() + str(library.value)[1:]


def test_a_run_recorded_by_0_9_0_reads_back_as_the_same_run():
    saved = MAKE_TRAIN_CONFIG_0_9_0
    config = TrainConfig.from_dict(saved)
    assert config == RunSettings().train_config()  # `make train` resumes its 0.9.0 run
    assert json.loads(json.dumps(config.to_dict())) == saved
    # A library run of 0.9.0 with its own values (and the router fields it left out).
    rng = random.Random(secrets.randbits(32))
    library = {
        **saved,
        "steps": rng.randint(1, 5000),
        "batch_size": rng.randint(1, 64),
        "eval_batches": None,
        "optimizer": {**saved["optimizer"], "lr": 3e-4, "warmup_steps": 0},
    }
    assert json.loads(json.dumps(TrainConfig.from_dict(library).to_dict())) == library
    # The settings recorded in 0.9.0's start record are those of `make train` now: a finished
    # run is still found finished.
    now = json.loads(json.dumps(flat(RunSettings()), default=str))
    assert now == MAKE_TRAIN_SETTINGS_0_9_0
    changed = resolve_settings(
        command="train", config_file=None, assignments=["on_nonfinite=skip"], flags={}
    )
    assert flat(changed)["on_nonfinite"] == "skip"  # a new key is recorded once it is set


def test_the_settings_and_the_run_config_import_without_jax():
    # The package's own __init__ is left out: what is tested is these modules' imports.
    code = (
        "import importlib.util, sys, types\n"
        "spec = importlib.util.find_spec('zoo_train')\n"
        "pkg = types.ModuleType('zoo_train')\n"
        "pkg.__path__ = list(spec.submodule_search_locations)\n"
        "sys.modules['zoo_train'] = pkg\n"
        "import zoo_train.settings\n"
        "from zoo_train.settings import MeshConfig, RunSettings\n"
        "RunSettings().mesh_text, MeshConfig.parse('data=2')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'optax')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    from zoo_train import parallel, settings

    assert parallel.MeshConfig is settings.MeshConfig
