"""Trackers end to end: `zoo train --tracker tensorboard,wandb` (W&B offline) over a resume,
the event files read back with TensorBoard's own reader and the W&B run's transaction log read
record by record, both against metrics.jsonl; `zoo metrics --to` replays."""

from __future__ import annotations

import json
import pathlib
import shutil
import struct
import time

import numpy as np
import pytest

import zoo_attention
import zoo_train
from zoo_train.cli import main
from zoo_train.testing import write_corpus
from zoo_train.tracking import WANDB_ID_FILE

CONFIG = """
model = "llama-tiny"
steps = 4
batch_size = 2
seq_len = 32
save_every = 2
eval_every = 2
log_every = 1
sample_tokens = 8
prompt = "def "
progress = false

[optimizer]
warmup_steps = 1

[wandb]
project = "zoo-tests"
tags = ["tiny", "resumed"]

[model_config]
d_model = 32
mlp_hidden = 64
"""


@pytest.fixture(scope="module", autouse=True)
def _offline_wandb(tmp_path_factory):
    """W&B offline, its own files kept out of the home directory."""
    home = tmp_path_factory.mktemp("wandb_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            patch.setenv(name, str(home / name.lower()))
        yield


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """A 4-step run in two calls (steps 1-2, then resumed), into TensorBoard and W&B; between
    them, events past the checkpoint as an interrupted call leaves them, with values the resumed
    run never produces."""
    from tensorboardX import SummaryWriter

    root = tmp_path_factory.mktemp("tracked")
    write_corpus(root / "corpus", files=40, lines=12)  # enough files to hold out by hash
    (root / "run.toml").write_text(CONFIG)
    run = root / "run"
    base = ["train", "--config", str(root / "run.toml"), "--data", str(root / "corpus")]
    base += ["--out", str(run), "--lr", "0.01", "--tracker", "tensorboard,wandb"]
    assert main([*base, "--stop-at", "2"]) == 0
    first_id = (run / WANDB_ID_FILE).read_text().strip()
    time.sleep(1.1)  # event files sort by their second of creation: this one after the first
    with SummaryWriter(str(run / "tensorboard")) as stale:
        for step in (3, 4):
            stale.add_scalar("train/loss", 99.0, step)
    time.sleep(1.1)
    assert main(base) == 0
    return run, first_id


def _expected_scalars(run: pathlib.Path) -> dict[str, list[tuple[int, np.float32]]]:
    """Every number of metrics.jsonl's train and eval records, by the README's tag rule."""
    out: dict[str, list[tuple[int, np.float32]]] = {}
    for r in zoo_train.read_metrics(run / zoo_train.METRICS_FILE):
        if "event" in r:
            continue
        for key, value in r.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, int | float):
                continue
            tag = "eval/" + key[5:] if key.startswith("eval_") else "train/" + key
            out.setdefault(tag, []).append((r["step"], np.float32(value)))
    return out


def _event_scalars(directory: pathlib.Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    scalars = {
        tag: [(e.step, np.float32(e.value)) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
    }
    return events, scalars


def test_tensorboard_holds_every_metric_at_its_step(tracked):
    run, _ = tracked
    events, scalars = _event_scalars(run / "tensorboard")
    expected = _expected_scalars(run)
    assert [s for s, _ in expected["train/loss"]] == [1, 2, 3, 4]
    assert [s for s, _ in expected["eval/loss"]] == [0, 2, 4]
    assert scalars == expected  # the stale 99.0s are purged
    # The settings as hyperparameters, the kernel as text, the sample and the loss curve.
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["lr"].number_value == 0.01 and hparams["seq_len"].number_value == 32
    assert hparams["model"].string_value == "llama-tiny"
    xla = zoo_attention.get_kernel("xla")
    kernels = events.Tensors("run/attention/text_summary")
    assert [e.step for e in kernels] == [0, 2]
    assert f"| xla | {xla.version} |" in kernels[-1].tensor_proto.string_val[0].decode()
    (sample,) = [e for e in events.Tensors("sample/text_summary") if e.step == 4]
    assert "def " in sample.tensor_proto.string_val[0].decode()
    assert [e.step for e in events.Images("loss_curve")] == [2, 4]


def _wandb_records(path: pathlib.Path):
    """The records of a W&B transaction log (``run-ID.wandb``): a 7-byte header, then LevelDB
    log framing (32 KiB blocks; per chunk a 4-byte checksum, 2-byte length, 1-byte type)."""
    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        room = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if room < 7 or (kind == 0 and length == 0):  # the zero padding at a block's end
            pos += room
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def test_wandb_offline_run_resumed_under_its_id(tracked):
    run, first_id = tracked
    assert (run / WANDB_ID_FILE).read_text().strip() == first_id
    calls = sorted((run / "wandb").glob(f"offline-run-*-{first_id}"))
    assert len(calls) == 2  # one per call, both under the run's id
    history: dict[str, list[tuple[int, np.float32]]] = {}
    for directory in calls:
        (log,) = directory.glob("run-*.wandb")
        assert log.name == f"run-{first_id}.wandb"
        for record in _wandb_records(log):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                assert record.run.run_id == first_id and record.run.project == "zoo-tests"
                assert list(record.run.tags) == ["tiny", "resumed"]
                assert record.run.display_name == "run"
                config = {i.key: json.loads(i.value_json) for i in record.run.config.update}
                assert config["lr"] == 0.01 and config["attention_kernels"].startswith("xla ")
            if kind == "history":
                step = record.history.step.num
                for item in record.history.item:  # a tag with a "/" is a nested key
                    tag, value = item.key or "/".join(item.nested_key), json.loads(item.value_json)
                    if tag.split("/")[0] in ("train", "eval"):  # not the fields of media
                        history.setdefault(tag, []).append((step, np.float32(value)))
    assert history == _expected_scalars(run)
    (sample,) = calls[-1].glob("files/media/table/sample_4_*.table.json")
    assert json.loads(sample.read_text())["data"][0][0].startswith("def ")
    assert len(list(calls[-1].glob("files/media/images/loss_curve_4_*.png"))) == 1


def test_metrics_replays_a_run(tracked, tmp_path, capsys):
    run, first_id = tracked
    assert main(["metrics", str(run), "--to", "tensorboard", "--logdir", str(tmp_path)]) == 0
    assert _event_scalars(tmp_path)[1] == _event_scalars(run / "tensorboard")[1]
    # The run's own directory already holds the live events (the stale ones purged): said,
    # nothing written.
    capsys.readouterr()
    files = sorted((run / "tensorboard").iterdir())
    assert main(["metrics", str(run), "--to", "tensorboard"]) == 0
    assert "already holds the events of" in capsys.readouterr().out
    assert sorted((run / "tensorboard").iterdir()) == files
    # Another folder of other events is not written over.
    other = tmp_path / "other"
    shutil.copytree(run / "tensorboard", other)
    (other / files[0].name).write_bytes(b"")  # one file emptied: another set of events
    assert main(["metrics", str(run), "--to", "tensorboard", "--logdir", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds other TensorBoard event files" in err and len(err.splitlines()) == 1
    before = set((run / "wandb").glob("offline-run-*"))
    assert main(["metrics", str(run), "--to", "wandb", "--wandb-project", "replays"]) == 0
    (replayed,) = set((run / "wandb").glob("offline-run-*")) - before
    assert not replayed.name.endswith(first_id)  # a W&B run of its own
    assert (run / WANDB_ID_FILE).read_text().strip() == first_id


def test_unknown_tracker_is_a_usage_error(tmp_path, capsys):
    assert main(["train", "--out", str(tmp_path / "run"), "--tracker", "tensorboard,neptune"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown tracker 'neptune'" in err.lower() and "jsonl, tensorboard, wandb" in err
    assert not (tmp_path / "run").exists()


# Writes one run's events with the tracker as a run does, reads them back with TensorBoard's own
# reader, and prints whether torch (installed here, for the parity tests) got imported.
_NO_TORCH_CHILD = """
import pathlib, sys
from zoo_train.tracking import RunStart, TensorBoardTracker
out = pathlib.Path(sys.argv[1])
tracker = TensorBoardTracker(out)
tracker.start(RunStart(step=0, resumed=False, settings={"lr": 0.1}, kernels=()))
tracker.scalars(1, {"train/loss": 2.5})
tracker.close()
torch_after_writing = "torch" in sys.modules
import tensorboardX  # the whole package, as a user's own code would: torch comes with it
print(torch_after_writing, "torch" in sys.modules, hasattr(tensorboardX, "SummaryWriter"))
"""


def test_tensorboard_events_are_written_without_importing_torch(tmp_path):
    """tensorboardX's package imports torch whenever it is installed (2.4 CPU seconds a run);
    the tracker writes its events without it, and a later ``import tensorboardX`` is whole."""
    import subprocess
    import sys

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    proc = subprocess.run(
        [sys.executable, "-c", _NO_TORCH_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "True", "True"]
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(1, 2.5)]
