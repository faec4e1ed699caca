"""Settings precedence (defaults < file < --set < flags), kernel requirements, provenance diffs."""

from __future__ import annotations

import importlib.metadata
import json
import pathlib

import pytest

from zoo_train import UsageError, check_requirement, provenance_changes
from zoo_train.settings import RunSettings, resolve_settings

TOML = """
steps = 40
batch_size = 4
lr = 0.01
data = ["a.txt", "b/"]

[optimizer]
warmup_steps = 7
schedule = "linear"

[attention]
implementation = "xla"
require = "zoo-attention>=1,<2"

[model_config]
n_layers = 4
"""


def test_file_overrides_defaults_and_command_line_overrides_file(tmp_path: pathlib.Path):
    (tmp_path / "run.toml").write_text(TOML)
    s = resolve_settings(
        command="train",
        config_file=str(tmp_path / "run.toml"),
        assignments=["optimizer.warmup_steps=9", "lr=0.02", "model_config.d_model=96"],
        flags={"lr": 0.05, "seq_len": 64},
    )
    assert s.steps == 40 and s.batch_size == 4  # file
    assert s.seq_len == 64  # flag
    assert s.lr == 0.05  # flag beats --set beats file
    assert s.optimizer.warmup_steps == 9  # --set beats file
    assert s.optimizer.schedule == "linear"
    assert s.data == ["a.txt", "b/"]
    assert s.attention.implementation == "xla"
    assert s.attention.require == "zoo-attention>=1,<2"
    assert s.model_config == {"n_layers": 4, "d_model": 96}
    # Everything not set keeps its default.
    assert s.checkpoint_every == RunSettings().checkpoint_every
    assert s.optimizer.b2 == RunSettings().optimizer.b2


# The TOML above as a MaxText or Levanter user writes a config: YAML, tables as mappings.
YAML = """
steps: 40
batch_size: 4
lr: 0.01
data: [a.txt, b/]
optimizer:
  warmup_steps: 7
  schedule: linear
attention:
  implementation: xla
  require: "zoo-attention>=1,<2"
model_config:
  n_layers: 4
"""


def test_json_and_yaml_files_match_toml(tmp_path: pathlib.Path):
    import tomllib

    (tmp_path / "run.toml").write_text(TOML)
    (tmp_path / "run.json").write_text(json.dumps(tomllib.loads(TOML)))
    (tmp_path / "run.yaml").write_text(YAML)
    (tmp_path / "run.yml").write_text(YAML)
    want = resolve_settings(
        command="train", config_file=str(tmp_path / "run.toml"), assignments=[], flags={}
    )
    for name in ("run.json", "run.yaml", "run.yml"):
        got = resolve_settings(
            command="train", config_file=str(tmp_path / name), assignments=[], flags={}
        )
        assert got == want, name
    (tmp_path / "bad.yaml").write_text("steps: [40\n")
    with pytest.raises(UsageError, match=r"bad\.yaml' is not valid"):
        resolve_settings(
            command="train", config_file=str(tmp_path / "bad.yaml"), assignments=[], flags={}
        )


def test_finetune_defaults_and_finetune_only_keys(tmp_path: pathlib.Path):
    s = resolve_settings(
        command="finetune",
        config_file=None,
        assignments=["lora.targets=q,v,up"],
        flags={"lora.rank": 4},
    )
    assert s.lr < RunSettings().lr and s.lora.rank == 4
    assert s.lora.targets == ["q", "v", "up"]
    with pytest.raises(UsageError, match="zoo finetune"):
        resolve_settings(command="train", config_file=None, assignments=["lora.rank=4"], flags={})


@pytest.mark.parametrize(
    ("assignment", "match"),
    [
        ("steps=1.5", "integer"),
        ("progress=maybe", "true or false"),
        ("stepz=3", "did you mean `steps`"),
        ("novalue", "KEY=VALUE"),
    ],
)
def test_bad_assignments(assignment: str, match: str):
    with pytest.raises(UsageError, match=match):
        resolve_settings(command="train", config_file=None, assignments=[assignment], flags={})


def test_check_requirement():
    installed = importlib.metadata.version("zoo-attention")
    assert check_requirement(f"zoo-attention=={installed}") == installed
    assert check_requirement("xla>=1") == installed  # a kernel name works too
    with pytest.raises(UsageError, match=f"zoo-attention {installed} is installed"):
        check_requirement("zoo-attention<1")
    with pytest.raises(UsageError, match="not installed"):
        check_requirement("zoo-not-a-kernel>=0.1")


def _prov(kernel: str, version: str, models: str = "0.1.0", jax: str = "0.10.2") -> dict:
    return {
        "packages": {"zoo-attention": "1.0.0", "zoo-models": models, "zoo-flash-tpu": "0.1.0"},
        "jax": jax,
        "backend": "cpu",
        "attention": [{"kernel": kernel, "version": version, "source": "argument"}],
    }


def test_provenance_changes_one_line_per_difference():
    same = _prov("xla", "1.0.0")
    assert provenance_changes(same, _prov("xla", "1.0.0")) == []
    assert provenance_changes(None, same) == []
    old, new = _prov("flash_tpu", "0.1.0"), _prov("xla", "1.0.0", models="0.2.0", jax="0.10.3")
    del new["packages"]["zoo-flash-tpu"]
    assert provenance_changes(old, new) == [
        "attention kernel: flash_tpu 0.1.0 -> xla 1.0.0",
        "zoo-flash-tpu: 0.1.0 -> not installed",
        "zoo-models: 0.1.0 -> 0.2.0",
        "jax: 0.10.2 -> 0.10.3",
    ]
    assert provenance_changes(_prov("flash_tpu", "0.1.0"), _prov("flash_tpu", "0.2.0")) == [
        "attention kernel: flash_tpu 0.1.0 -> flash_tpu 0.2.0"
    ]


def test_provenance_changes_name_the_grouped_matmul_kernel_once_it_is_recorded():
    tiled = [{"kernel": "tiled", "version": "0.4.2", "source": "default"}]
    megablox = [{"kernel": "megablox", "version": "0.1.0", "source": "default"}]
    old, new = _prov("xla", "1.0.0"), _prov("xla", "1.0.0")
    new["grouped_matmul"] = tiled
    # A checkpoint from before grouped matmuls were recorded: nothing to compare with.
    assert provenance_changes(old, new) == []
    old["grouped_matmul"] = tiled
    assert provenance_changes(old, new) == []
    new["grouped_matmul"] = megablox
    assert provenance_changes(old, new) == ["grouped matmul: tiled 0.4.2 -> megablox 0.1.0"]


def test_provenance_changes_name_a_switched_off_linear_attention_kernel():
    tpu = [{"kernel": "deltanet_tpu", "version": "0.1.0", "source": "default"}]
    xla = [{"kernel": "chunked_xla", "version": "1.0.0", "source": "fallback"}]
    old, new = _prov("xla", "1.0.0"), _prov("xla", "1.0.0")
    new["linear_attention"] = xla
    assert provenance_changes(old, new) == []  # the saved model had no gated DeltaNet layers
    old["linear_attention"] = tpu
    assert provenance_changes(old, new) == [
        "linear attention: deltanet_tpu 0.1.0 -> chunked_xla 1.0.0"
    ]
