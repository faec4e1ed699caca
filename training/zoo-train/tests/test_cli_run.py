"""`zoo train` end to end (config + flags, resume, kernel change), `zoo generate`, `zoo eval`,
`zoo models` and `zoo kernels`, run in-process through `zoo_train.cli.main`."""

from __future__ import annotations

import gc
import json
import math
import os
import pathlib
import re
import shutil
import sys
import time

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from cli_helpers import mounted_tmpfs
from lock_holder import held_lock

import zoo_attention
import zoo_attention.grouped.testing
import zoo_attention.testing
import zoo_train
from zoo_attention import grouped
from zoo_train._run_directory import checkpoint_steps
from zoo_train.cli import main
from zoo_train.cli._kernels_here import here_rows
from zoo_train.data import HeldOut, TokenStore, prepare_store
from zoo_train.testing import write_corpus

CONFIG = """
model = "llama-tiny"
steps = 6
batch_size = 2
seq_len = 32
save_every = 2
eval_every = 3
log_every = 1
sample_tokens = 0
progress = false

[optimizer]
warmup_steps = 1

[model_config]
d_model = 32
mlp_hidden = 64
"""


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 6-step run done as two calls: steps 1-2 on `chunked`, then resumed on `xla`."""
    root = tmp_path_factory.mktemp("cli_run")
    # 40 files: enough to hold out 5% by hash (fewer are held out whole, where one fits)
    write_corpus(root / "corpus", files=40, lines=12)
    (root / "run.toml").write_text(CONFIG)
    base = [
        "train",
        "--config",
        str(root / "run.toml"),
        "--data",
        str(root / "corpus"),
        "--out",
        str(root / "run"),
    ]
    first = main([*base, "--lr", "0.01", "--stop-at", "2", "--attention-implementation", "chunked"])
    assert first == 0
    return root, base


def _records(run: pathlib.Path) -> list[dict]:
    return zoo_train.read_metrics(run / zoo_train.METRICS_FILE)


def test_config_and_flags_reach_the_run(trained):
    root, _ = trained
    start = next(r for r in _records(root / "run") if r.get("event") == "start")
    cfg = start["config"]
    assert cfg["steps"] == 6 and cfg["batch_size"] == 2 and cfg["checkpoint_every"] == 2  # file
    assert cfg["optimizer"]["lr"] == 0.01  # flag
    assert cfg["optimizer"]["warmup_steps"] == 1  # file table
    assert start["kernel"] == f"chunked {zoo_attention.get_kernel('chunked').version}"
    assert zoo_train.Checkpointer(root / "run" / "checkpoints").steps() == [2]


def test_resume_reports_the_kernel_change_then_completes(trained, capsys):
    root, base = trained
    capsys.readouterr()
    assert main([*base, "--lr", "0.01"]) == 0
    err = capsys.readouterr().err
    assert "resuming" in err
    chunked, xla = zoo_attention.get_kernel("chunked"), zoo_attention.get_kernel("xla")
    assert (
        f"changed since checkpoint 2: attention kernel: chunked {chunked.version} -> xla {xla.version}"
        in err
    )
    records = _records(root / "run")
    assert [r["step"] for r in records if "loss" in r] == [1, 2, 3, 4, 5, 6]
    losses = [r["loss"] for r in records if "loss" in r]
    assert losses[-1] < losses[0]
    # A third call finds the run complete and trains nothing: no figures, no sample.
    assert main([*base, "--lr", "0.01", "--sample-tokens", "5"]) == 0
    err, out = capsys.readouterr()[::-1]
    assert "already complete" in err and "changed since" not in err
    assert "tokens/s" not in err and "--- sample" not in out
    assert [r["step"] for r in _records(root / "run") if "loss" in r] == [1, 2, 3, 4, 5, 6]
    # Other settings on the same directory are refused, and nothing is overwritten.
    assert main([*base, "--lr", "0.02"]) == 2
    assert "different run" in capsys.readouterr().err


def test_generate_prints_text(trained, capsys):
    root, _ = trained
    capsys.readouterr()
    assert (
        main(
            [
                "generate",
                str(root / "run"),
                "--prompt",
                "def ",
                "--max-new-tokens",
                "12",
                "--greedy",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # Something was generated after the prompt (six steps in, often spaces: the commonest byte).
    assert out.startswith("def ") and len(out.rstrip("\n")) > len("def ")
    loaded = zoo_train.load_run(root / "run")
    assert loaded.step == 6
    # Greedy generation is deterministic and matches the library call.
    again = zoo_train.sample_text(
        loaded.model, loaded.tokenizer, "def ", max_new_tokens=12, greedy=True
    )
    assert out == "def " + again + "\n"


def test_generation_stops_at_the_models_positions_with_a_note(trained, capsys):
    root, _ = trained
    capsys.readouterr()
    asked = 100_000_000  # a RoPE model: it was sized for 141 GB of cache, then died in XLA
    assert main(["generate", str(root / "run"), "--max-new-tokens", str(asked), "--greedy"]) == 0
    err = capsys.readouterr().err
    loaded = zoo_train.load_run(root / "run")
    prompt = len(loaded.tokenizer.encode("def "))
    room = loaded.model.config.max_position - prompt
    assert f"generating at most {room} new tokens, not {asked}: the model has " in err, err


def test_eval_prints_loss_and_perplexity(trained, capsys):
    root, _ = trained
    capsys.readouterr()
    corpus = root / "corpus"
    args = ["--data", str(corpus), "--seq-len", "32", "--batch-size", "4", "--max-batches", "3"]
    assert main(["eval", str(root / "run"), *args, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    # Independent: per-token cross entropy in float64 numpy from the model's logits.
    loaded = zoo_train.load_run(root / "run")
    # The rows `zoo eval` reads: the corpus whole, as a token store.
    prepare_store(corpus, root / "eval-store", workers=1, eval_fraction=0.0, progress=False)
    loader = HeldOut(TokenStore(root / "eval-store"), 32, splits=("train", "eval"))
    forward = eqx.filter_jit(
        lambda m, b: m(b["input_ids"], positions=b["positions"], segment_ids=b["segment_ids"])
    )
    total, count = 0.0, 0.0
    for batch in loader.eval_batches(4, max_batches=3):
        logits = np.asarray(forward(loaded.model, batch), np.float64)
        logp = logits - logits.max(-1, keepdims=True)
        logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
        nll = -np.take_along_axis(logp, batch["targets"][..., None], -1)[..., 0]
        total += float((nll * batch["loss_mask"]).sum())
        count += float(batch["loss_mask"].sum())
    assert got["tokens"] == count
    np.testing.assert_allclose(got["loss"], total / count, rtol=1e-5)
    np.testing.assert_allclose(got["ppl"], math.exp(total / count), rtol=1e-5)
    assert main(["eval", str(root / "run"), *args]) == 0
    line = capsys.readouterr().out
    assert line.startswith("loss ") and "perplexity" in line


def test_readers_work_while_a_run_trains_and_change_nothing(trained, tmp_path, capsys):
    root, _ = trained
    run = root / "run"
    # A save in flight of the training process: a reader must not clean it up.
    in_flight = run / "checkpoints" / "1000.orbax-checkpoint-tmp-1"
    in_flight.mkdir()
    try:
        with held_lock(run):
            before = sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*"))
            args = ["--max-new-tokens", "4", "--greedy"]
            assert main(["generate", str(run), *args]) == 0
            corpus = ["--data", str(root / "corpus"), "--max-batches", "1", "--seq-len", "32"]
            assert main(["eval", str(run), *corpus]) == 0
            assert main(["convert", str(run), str(tmp_path / "hf")]) == 0
            after = sorted((p.relative_to(run), p.stat().st_mtime_ns) for p in run.rglob("*"))
            assert after == before
    finally:
        in_flight.rmdir()


def test_damaged_checkpoints_do_not_block_readers(trained, tmp_path, capsys, monkeypatch):
    root, base = trained
    if len(checkpoint_steps(root / "run")) < 2:  # this test run alone
        assert main([*base, "--lr", "0.01"]) == 0
    run = shutil.copytree(root / "run", tmp_path / "run")
    steps = checkpoint_steps(run)
    ckpts = run / "checkpoints"
    # A torn metrics file of the oldest evaluated step (Orbax parses them to list the steps)...
    evaluated = sorted(int(p.parent.parent.name) for p in ckpts.glob("*/metrics/metrics"))
    torn = ckpts / str(evaluated[0]) / "metrics" / "metrics"
    torn.write_text(torn.read_text()[: np.random.default_rng().integers(1, 10)])
    # ...and zeroed arrays in the newest: its restore fails and the previous one is used.
    for f in (ckpts / str(steps[-1]) / "state").rglob("d/*"):
        f.write_bytes(b"\0" * f.stat().st_size)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    capsys.readouterr()
    assert main(["convert", str(run), str(tmp_path / "hf")]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert f"wrote step {steps[-2]} of" in out
    # One short line for the bad step (no TensorStore spec or object dump), said once.
    (line,) = [x for x in err.splitlines() if f"checkpoint {steps[-1]} " in x]
    assert len(line) < 300 and "tensorstore" not in line and "<" not in line, line
    assert line.endswith(f"trying checkpoint {steps[-2]}"), line
    # Every checkpoint bad: a line each, then one short sentence.
    for step in steps[:-1]:
        for f in (ckpts / str(step) / "state").rglob("d/*"):
            f.write_bytes(b"\0" * f.stat().st_size)
    assert main(["generate", str(run), "--max-new-tokens", "2"]) == 2
    gc.collect()  # the failed restores' sibling reads, logged if ever when collected
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == len(steps) + 1 and all(len(x) < 300 for x in err), err
    assert err[-1] == (
        f"zoo generate: error: None of the checkpoints in {ckpts} can be read (steps "
        f"{', '.join(map(str, steps))}, each reported above); move them away or pick another "
        "output directory (they are never overwritten)."
    )
    time.sleep(0.5)  # the reads Orbax abandoned complete in the background
    gc.collect()
    assert [str(u.exc_value) for u in unraisable] == []  # no "Event loop is closed" tracebacks


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("zoo train: error: ") and err[-1].endswith("."), err
    assert not any("Traceback" in line or "ERROR" in line for line in err), err
    return err[-1]


def test_full_disk_and_read_only_output_are_one_sentence(trained, tmp_path, capsys):
    _, base = trained
    # The data's store off the small disk: what fills it here is the run's own writing.
    base = [*base[: base.index("--out")], "--data-cache", str(tmp_path / "cache")]
    disk = tmp_path / "disk"
    # Room for one or two checkpoints of ~0.4 MB, not three: which save fills the disk depends
    # on when Orbax's rotation frees an older one, so the step is read from the sentence.
    with mounted_tmpfs(disk, "700k"):
        assert main([*base, "--out", str(disk / "run"), "--lr", "0.01"]) == 2
        line = _one_error_line(capsys)
        failed = re.search(r"Writing checkpoint (\d+) ", line)
        assert failed and "no space left on device" in line, line
        intact = zoo_train.load_run(disk / "run").step  # the earlier checkpoints are intact
        assert 2 <= intact < int(failed.group(1)) and intact % 2 == 0
        assert checkpoint_steps(disk / "run")[-1] == intact  # nothing half-written is listed
    with mounted_tmpfs(disk, "64k"):  # one page left: the lock's; the metrics file gets none
        (disk / "filler").write_bytes(b"x" * (64 - 4) * 1024)
        assert main([*base, "--out", str(disk / "run"), "--lr", "0.01"]) == 2
        line = _one_error_line(capsys)
        assert "metrics.jsonl: no space left on device" in line, line
    with mounted_tmpfs(disk, "64k", read_only=True):
        assert main([*base, "--out", str(disk / "run"), "--lr", "0.01"]) == 2
        assert "read-only file system" in _one_error_line(capsys)


def test_a_checkpoint_that_cannot_be_deleted_is_one_sentence(trained, tmp_path, capsys):
    _, base = trained
    run = tmp_path / "run"
    args = [*base[: base.index("--out")], "--out", str(run), "--lr", "0.01", "--set", "keep=1"]
    assert main([*args, "--stop-at", "2"]) == 0
    with mounted_tmpfs(run / "checkpoints" / "2" / "pinned", "64k"):  # a mount point: EBUSY
        assert main([*args, "--stop-at", "4"]) == 2  # saving 4 rotates 2 out
        line = _one_error_line(capsys)
    assert "Deleting checkpoint 2" in line and "device or resource busy" in line, line
    assert checkpoint_steps(run)[-1] == 4  # the newer checkpoint is committed


def test_finetune_from_run_reports_kernel_change_and_an_export_to_a_full_disk(
    trained, tmp_path, capsys
):
    root, _ = trained
    capsys.readouterr()
    disk = tmp_path / "disk"
    with mounted_tmpfs(disk, "64k"):  # the export's weights do not fit
        code = main([
            "finetune", "--from-run", str(root / "run"), "--data", str(root / "corpus"),
            "--out", str(root / "ft"), "--steps", "2", "--batch-size", "2", "--seq-len", "32",
            "--lora-rank", "2", "--no-progress", "--eval-every", "0",
            "--attention-implementation", "chunked", "--export-hf", str(disk / "export"),
        ])  # fmt: skip
        assert os.listdir(disk) == []  # no half-written export, no temporary sibling
    err = capsys.readouterr().err
    # safetensors' own error for the full disk was a traceback: one sentence naming the export.
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"zoo finetune: error: Cannot write {disk / 'export'}: no space left on device; free "
        "space or choose a writable output directory (committed checkpoints are intact)."
    )
    xla = zoo_attention.get_kernel("xla").version
    assert f"attention kernel: xla {xla} -> chunked " in err
    run = zoo_train.load_run(root / "ft")
    assert run.lora is not None and run.step == 2
    assert run.meta["run_info"]["init"]["kind"] == "run"


@pytest.mark.parametrize("direction", ["to_hf", "from_hf"])
def test_convert_into_a_full_or_read_only_disk_is_one_sentence(
    trained, tmp_path, capsys, direction
):
    root, _ = trained
    source = root / "run"
    if direction == "from_hf":
        assert main(["convert", str(source), str(tmp_path / "hf")]) == 0
        source = tmp_path / "hf"
    disk = tmp_path / "disk"
    for options, reason in (({}, "no space left on device"), ({"read_only": True}, "read-only")):
        with mounted_tmpfs(disk, "64k", **options):
            capsys.readouterr()
            assert main(["convert", str(source), str(disk / "model")]) == 2
            assert os.listdir(disk) == []
            gc.collect()  # the failed save's sibling writes, logged if ever when collected
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith(f"zoo convert: error: Cannot write {disk / 'model'}: {reason}")
        assert "Traceback" not in "\n".join(err) and "checkpoint" not in err[-1], err


def test_models_and_kernels_listings(tmp_path, capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "llama-tiny" in out and "gpt2" in out
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    for name, kernel in zoo_attention.kernels().items():
        assert name in out and kernel.version in out
    header = next(line for line in out.splitlines() if line.startswith("name "))
    assert "serves" not in header  # read from metadata: no column that needs JAX
    assert "ragged_dot" in out and "grouped_matmul" in out  # the other kind of kernel
    assert main(["kernels", "--here"]) == 0
    out = capsys.readouterr().out
    for name, kernel in [*zoo_attention.kernels().items(), *grouped.kernels().items()]:
        assert name in out and kernel.version in out
    assert "no: needs a TPU" in out  # flash_tpu on a CPU host, with the reason
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    ragged = rows["ragged_dot"]
    assert ragged[1] == "grouped_matmul" and ragged[3] == grouped.GROUPED_MATMUL_CONTRACT_VERSION
    assert ragged[5:] == ["cpu,gpu,tpu", "fallback", "yes"]
    # megablox (zoo-megablox, a package of this tree) on a CPU host, with its reason.
    assert rows["megablox"][5:10] == ["tpu", "tpu", "no:", "needs", "a"]


class _Zeros(zoo_attention.AttentionKernel):
    """A wrong kernel (attention output all zeros): the conformance cases must catch it."""

    name = "zeros_for_test"

    def check(self, spec):
        return None

    def __call__(self, query, key, value, segment_ids, spec):
        return jnp.zeros_like(query)


def test_kernels_verify_exit_codes(capsys):
    assert main(["kernels", "verify", "no_such_kernel"]) == 2
    assert "Unknown kernel" in capsys.readouterr().err
    zoo_attention.register_kernel(_Zeros(), replace=True)
    try:
        assert main(["kernels", "verify", "zeros_for_test"]) == 1
    finally:
        zoo_attention.unregister_kernel("zeros_for_test")
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert any(" FAIL " in line for line in lines)
    assert lines[-1].endswith(" failed") and not lines[-1].endswith(" 0 failed")
    count = len(zoo_attention.testing.CASES) + 1  # every case and the named-scope check
    assert f"{count} checks, about " in err  # how many, and how long, said up front
    assert [line.split()[0] for line in lines[:-1]] == [f"{i}/{count}" for i in range(1, count + 1)]


class _GroupedZeros(grouped.GroupedMatmulKernel):
    """A wrong grouped-matmul kernel (all zeros): its kind's conformance cases must catch it."""

    name = "zeros_gmm_for_test"

    def check(self, spec):
        return None

    def __call__(self, lhs, rhs, group_sizes, spec):
        return jnp.zeros((lhs.shape[0], rhs.shape[2]), lhs.dtype)


def test_kernels_verify_runs_a_grouped_matmul_kernels_own_cases(capsys):
    grouped.register_kernel(_GroupedZeros(), replace=True)
    try:
        assert main(["kernels", "verify", "zeros_gmm_for_test"]) == 1
    finally:
        grouped.unregister_kernel("zeros_gmm_for_test")
    out, err = capsys.readouterr()
    count = len(zoo_attention.grouped.testing.CASES) + 1
    assert "verifying zeros_gmm_for_test " in err and f"{count} checks, about " in err
    lines = out.splitlines()
    assert lines[-1] != f"{count} passed, 0 failed" and "max abs error" in out
    assert [line.split()[0] for line in lines[:-1]] == [f"{i}/{count}" for i in range(1, count + 1)]


def test_train_with_unknown_kernel_is_a_usage_error(tmp_path, capsys):
    write_corpus(tmp_path / "c", files=3)
    code = main(
        [
            "train",
            "--data",
            str(tmp_path / "c"),
            "--out",
            str(tmp_path / "o"),
            "--attention-implementation",
            "warp",
        ]
    )
    assert code == 2
    assert "warp" in capsys.readouterr().err


def _expected_steps(corpus: pathlib.Path, epochs: float, tmp: pathlib.Path) -> tuple[int, int]:
    """The steps of ``epochs`` passes over the training split of ``corpus`` at batch 2 and
    seq_len 32 (the CONFIG's), and the rows an epoch holds: the training split's tokens (its
    own store, prepared as a run prepares it) cut into rows of 33 that overlap by one."""
    prepare_store(corpus, tmp, eval_fraction=0.05, workers=1, progress=False)
    tokens = TokenStore(tmp).split("train").num_tokens
    rows = (tokens - 1) // 32
    return max(1, round(epochs * rows / 2)), rows


def test_epochs_set_the_steps_and_the_start_line_says_what_it_trains(trained, capsys):
    root, base = trained
    args = [*base[: base.index("--out")], "--out", str(root / "epochs")]
    assert main([*args, "--epochs", "1", "--steps", "3"]) == 2
    assert "not both" in capsys.readouterr().err
    steps, rows = _expected_steps(root / "corpus", 0.01, root / "epochs-store")
    assert main([*args, "--epochs", "0.01", "--set", "progress=true"]) == 0
    err = capsys.readouterr().err
    start = next(r for r in _records(root / "epochs") if r.get("event") == "start")
    assert start["config"]["steps"] == steps
    line = next(x for x in err.splitlines() if x.startswith("zoo: train "))
    assert line.startswith("zoo: train llama-tiny on ")  # the preset, not the family
    assert f"{steps} steps of 2 x 32 tokens ({steps * 2 / rows:.2g} epochs)" in line
    # The corpus by its own path, not by its store in the data cache; what the split holds out.
    split = TokenStore(root / "epochs-store").manifest["splits"]
    held = split["eval"]["tokens"] / (split["eval"]["tokens"] + split["train"]["tokens"])
    docs = split["eval"]["documents"] + split["train"]["documents"]
    out = (
        f"held out: {split['eval']['documents']}, {held:.1%} of the tokens"
        if split["eval"]["documents"]
        else "none held out"
    )
    assert f" on {root / 'corpus'} ({docs} documents; {out})" in line, line
    # The lines before the first step are plain lines, not drawn over an empty bar.
    assert not any("|" in x and "starting" in x for x in err.splitlines()), err
    assert "epoch=" in err  # the bar shows the epoch


def test_many_passes_are_warned_and_one_record_is_no_trend(trained, tmp_path, capsys):
    _, base = trained
    (tmp_path / "tiny.txt").write_text("def alpha(x):\n    return x\n" * 6)
    args = [*base[: base.index("--data")], "--data", str(tmp_path / "tiny.txt")]
    args += ["--out", str(tmp_path / "run"), "--steps", "12", "--log-every", "20"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "zoo: warning: 12 steps of 2 rows pass over the training data" in err
    assert "--epochs N" in err
    summary = next(x for x in err.splitlines() if x.startswith("zoo: steps 0 -> 12"))
    assert "->" not in summary.split("train loss")[1], summary  # one record: no trend
    assert "(steps 1-12)" in summary


def test_epochs_asked_are_the_nearest_whole_steps_and_a_mismatch_is_said(trained, tmp_path, capsys):
    # Data smaller than a batch: 5 epochs of 5 rows at 16 rows a step. Whole steps make 6.4
    # passes (2 steps) at best; the start line says so and names a batch that makes 5 exactly,
    # and never asks for the --epochs that was passed.
    _, base = trained
    (tmp_path / "tiny.txt").write_text("def alpha(x):\n    return x\n" * 6)
    _, rows = _expected_steps(tmp_path / "tiny.txt", 1, tmp_path / "store")
    args = [*base[: base.index("--data")], "--data", str(tmp_path / "tiny.txt")]
    args += ["--out", str(tmp_path / "run"), "--epochs", "5", "--batch-size", "16"]
    assert main(args) == 0
    err = capsys.readouterr().err
    steps = max(1, round(5 * rows / 16))
    start = next(r for r in _records(tmp_path / "run") if r.get("event") == "start")
    assert start["config"]["steps"] == steps
    assert "--epochs N" not in err and "instead of --steps" not in err, err
    passes = steps * 16 / rows
    exact = max(b for b in range(1, rows + 1) if (5 * rows) % b == 0)
    note = (
        f"zoo: note: --epochs 5 over {rows} rows of 32 tokens at 16 rows a step: {steps} "
        f"step{'' if steps == 1 else 's'} make{'s' if steps == 1 else ''} {passes:.2g} epochs, "
        f"the nearest that whole steps come; --batch-size {exact} makes exactly 5."
    )
    assert note in err, err


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
        rows = {r["name"]: r for r in here_rows()}
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
        here_rows()
    finally:
        zoo_attention.unregister_kernel("asked_for_test")
    here = zoo_attention.find_target().platform
    assert {kind for platform, kind in kernel.asked if platform != here} == {None}
    assert any(platform == here and kind is not None for platform, kind in kernel.asked)
