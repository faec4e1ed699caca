"""The loop end to end: metrics, checkpoints, resume, refusals, torn checkpoints, NaN handling."""

import importlib.metadata
import json
import logging
import pathlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiny_lm import loaders, make_model

import zoo_train
from zoo_train import Checkpointer, OptimizerConfig, TrainConfig


def _config(**kw):
    base = dict(
        steps=12,
        batch_size=4,
        grad_accum=2,
        optimizer=OptimizerConfig(lr=3e-3, warmup_steps=2),
        log_every=2,
        eval_every=4,
        checkpoint_every=4,
        keep=2,
        progress=False,
        plot=False,
    )
    base.update(kw)
    return TrainConfig(**base)


def _run(out, config, **kw):
    train, val = loaders(0)
    return zoo_train.train(make_model(0), train, config=config, out=out, eval_data=val, **kw)


def _params(result_or_state):
    state = getattr(result_or_state, "state", result_or_state)
    return [np.asarray(x) for x in jax.tree.leaves(eqx.filter(state, eqx.is_array))]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)  # exact, bit for bit


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """One uninterrupted 12-step run, shared by the tests that compare against it."""
    out = tmp_path_factory.mktemp("straight")
    return _run(out, _config(plot=True))


def test_metrics_plot_and_kernel(straight):
    records = zoo_train.read_metrics(straight.out / zoo_train.METRICS_FILE)
    start = records[0]
    assert start["event"] == "start" and start["kernel"].startswith("xla ")
    assert start["attention"][0]["kernel"] == "xla"
    train = [r for r in records if "loss" in r and "event" not in r]
    assert [r["step"] for r in train] == [2, 4, 6, 8, 10, 12]
    for r in train:
        assert {"loss", "lr", "tokens_per_s", "grad_norm", "tokens", "kernel"} <= r.keys()
        assert np.isfinite(r["loss"]) and r["tokens"] > 0
    assert all(r["tokens_per_s"] > 0 for r in train[1:])
    evals = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in evals] == [0, 4, 8, 12]  # from the untrained model on
    assert all(np.isclose(r["eval_ppl"], np.exp(r["eval_loss"])) for r in evals)
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] + 0.5
    png = straight.out / zoo_train.PLOT_FILE
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_checkpoint_contents_and_provenance(straight):
    ckpt = Checkpointer(straight.out / zoo_train.CHECKPOINT_DIR)
    try:
        steps = ckpt.steps()
        best = ckpt.best_step()
        meta = ckpt.read_meta(12)
    finally:
        ckpt.close()
    # keep=2 newest (8, 12) plus the best by eval loss (one of 4, 8, 12).
    evals = {
        r["step"]: r["eval_loss"]
        for r in zoo_train.read_metrics(straight.out / "metrics.jsonl")
        if "eval_loss" in r and r["step"] > 0  # step 0 is evaluated, not checkpointed
    }
    want_best = min(evals, key=evals.get)
    assert best == want_best
    assert steps == sorted({8, 12, want_best})
    assert meta["step"] == 12
    assert meta["data_state"] == {
        "epoch": meta["data_state"]["epoch"],
        "row": meta["data_state"]["row"],
    }
    assert meta["config"]["steps"] == 12 and meta["config"]["optimizer"]["lr"] == 3e-3
    prov = meta["provenance"]
    for dist in ("zoo-attention", "zoo-train"):
        assert prov["packages"][dist] == importlib.metadata.version(dist)
    assert prov["jax"] == jax.__version__
    assert prov["attention"][0]["kernel"] == "xla"
    assert prov["attention"][0]["version"] == importlib.metadata.version("zoo-attention")
    names = [leaf[0] for leaf in meta["leaves"]]
    assert ".step" in names and ".key" in names and any(n.startswith(".opt_state") for n in names)
    assert len(meta["fingerprints"]) == len(names) == len(_params(straight))
    # The checkpoint holds exactly the final state.
    ckpt = Checkpointer(straight.out / zoo_train.CHECKPOINT_DIR)
    try:
        restored = ckpt.restore(straight.state)
    finally:
        ckpt.close()
    assert restored.step == 12 and restored.skipped == []
    _assert_same(_params(restored.state), _params(straight))


def test_resume_is_bitwise_identical(straight, tmp_path, caplog, capsys):
    first = _run(tmp_path, _config(), stop_at=6)
    assert first.step == 6 and first.resumed_from is None
    # A torn piece of an older checkpoint (the metrics Orbax ranks steps by) is set aside.
    metrics = tmp_path / "checkpoints" / "4" / "metrics" / "metrics"
    metrics.write_text(metrics.read_text()[: np.random.default_rng().integers(1, 10)])
    capsys.readouterr()
    with caplog.at_level("WARNING", logger="zoo_train"):
        second = _run(tmp_path, _config())  # a new call with a new model: resumes automatically
    assert second.resumed_from == 6 and second.step == 12
    (report,) = second.skipped_checkpoints
    assert "checkpoint 4" in report and "metrics/metrics" in report
    # Reported once, on one short line (it was logged, then printed again).
    told = [r.getMessage() for r in caplog.records if "checkpoint 4" in r.getMessage()]
    # One line, the path and JSON's own reason (it was about 1,000 characters with an object dump).
    assert told == [report] and len(report) < 300 + len(str(tmp_path)), told
    assert "checkpoint 4" not in capsys.readouterr().err
    assert [p.name[:2] for p in (tmp_path / "checkpoints-unreadable").iterdir()] == ["4-"]
    _assert_same(_params(second), _params(straight))
    records = zoo_train.read_metrics(tmp_path / "metrics.jsonl")
    assert [r["event"] for r in records if "event" in r] == ["start", "resume"]
    # Resuming a finished run does nothing and leaves the checkpoints as they are.
    before = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    third = _run(tmp_path, _config())
    assert third.resumed_from == 12 and third.step == 12
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == before


class _FailingTracker:
    """A tracker whose every call raises, as one on a full disk or a lost connection does."""

    name = "failing"

    def __init__(self):
        self.calls = []

    def __getattr__(self, method):
        def fail(*args):
            self.calls.append(method)
            raise OSError(28, "No space left on device")

        return fail


def test_a_failing_tracker_is_reported_once_and_training_goes_on(straight, tmp_path, caplog):
    failing = _FailingTracker()
    with (
        caplog.at_level(logging.WARNING, logger="zoo_train"),
        zoo_train.tracking.Trackers([failing]) as trackers,
    ):
        result = _run(tmp_path, _config(), on_record=trackers.record)
    _assert_same(_params(result), _params(straight))

    def losses(out):
        records = zoo_train.read_metrics(out / zoo_train.METRICS_FILE)
        return [(r["step"], r["loss"]) for r in records if "loss" in r and "event" not in r]

    assert losses(tmp_path) == losses(straight.out) and len(losses(tmp_path)) == 6
    (warning,) = [r.getMessage() for r in caplog.records if "tracker" in r.getMessage()]
    assert "failing tracker failed" in warning and "No space left on device" in warning
    assert "switched off" in warning
    assert failing.calls == ["start", "close"]  # nothing after the first failure but its close


def test_refuses_a_different_run_and_never_overwrites(tmp_path):
    _run(tmp_path, _config(steps=4, eval_every=0, checkpoint_every=4))
    snapshot = {p: p.read_bytes() for p in (tmp_path / "checkpoints").rglob("*") if p.is_file()}
    with pytest.raises(zoo_train.CheckpointMismatchError, match=r"optimizer\.lr: 0\.003 → 0\.001"):
        _run(
            tmp_path,
            _config(steps=4, eval_every=0, optimizer=OptimizerConfig(lr=1e-3, warmup_steps=2)),
        )
    train, _ = loaders(0)
    with pytest.raises(zoo_train.CheckpointMismatchError, match="different model"):
        zoo_train.train(
            make_model(0, dim=16), train, config=_config(steps=4, eval_every=0), out=tmp_path
        )
    with pytest.raises(zoo_train.CheckpointMismatchError, match=r"data\."):
        zoo_train.train(
            make_model(0), loaders(1)[0], config=_config(steps=4, eval_every=0), out=tmp_path
        )
    after = {p: p.read_bytes() for p in (tmp_path / "checkpoints").rglob("*") if p.is_file()}
    assert after == snapshot


def _corrupt_arrays(step_dir: pathlib.Path):
    for f in (step_dir / "state").rglob("*"):
        if f.is_file() and f.parent.name == "d":
            f.write_bytes(b"\0" * f.stat().st_size)


def _corrupt_meta(step_dir: pathlib.Path):
    (step_dir / "meta" / "metadata").write_text("{ torn")


def _corrupt_checksum(step_dir: pathlib.Path):
    # Readable, valid JSON, but the arrays no longer match what was saved.
    path = step_dir / "meta" / "metadata"
    meta = json.loads(path.read_text())
    meta["fingerprints"][0] ^= 1
    path.write_text(json.dumps(meta))


# Orbax's restore of a corrupt array leaves callbacks for its closed event loop, which Python
# would report as unraisable "Event loop is closed" tracebacks: they must not reach the user.
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("corrupt", [_corrupt_arrays, _corrupt_meta, _corrupt_checksum])
def test_torn_latest_checkpoint_falls_back_to_the_previous(straight, tmp_path, corrupt):
    cfg = _config(keep=3, eval_every=0)
    _run(tmp_path, cfg, stop_at=8)
    corrupt(tmp_path / "checkpoints" / "8")
    resumed = _run(tmp_path, cfg)
    assert resumed.resumed_from == 4
    assert (
        len(resumed.skipped_checkpoints) == 1 and "checkpoint 8" in resumed.skipped_checkpoints[0]
    )
    if corrupt is _corrupt_checksum:
        assert "checksums" in resumed.skipped_checkpoints[0]
    assert list((tmp_path / "checkpoints-unreadable").iterdir())  # kept aside, not deleted
    start = [
        r for r in zoo_train.read_metrics(tmp_path / "metrics.jsonl") if r.get("event") == "resume"
    ]
    assert start[0]["skipped_checkpoints"] == resumed.skipped_checkpoints
    _assert_same(_params(resumed), _params(straight))


def test_no_readable_checkpoint_is_refused(tmp_path):
    cfg = _config(steps=4, eval_every=0)
    _run(tmp_path, cfg)
    _corrupt_meta(tmp_path / "checkpoints" / "4")
    with pytest.raises(zoo_train.NoUsableCheckpointError, match="never overwritten"):
        _run(tmp_path, cfg)
    assert (tmp_path / "checkpoints" / "4").exists()


class _Poisoned:
    """Wraps a loader; the batch of step `bad` (counted from a fresh start) has a NaN scale."""

    def __init__(self, inner, bad):
        self.inner, self.bad, self.calls = inner, bad, 0

    def next_batch(self, n):
        b = self.inner.next_batch(n)
        self.calls += 1
        b["scale"] = np.full((n,), np.nan if self.calls == self.bad else 1.0, np.float32)
        return b

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _poison_loss():
    base = zoo_train.make_lm_loss()

    def loss(model, batch, key):
        s, aux = base(model, batch, key)
        return s * jnp.mean(batch["scale"]), aux

    return loss


def test_nonfinite_stop_keeps_the_last_good_checkpoint(tmp_path):
    train, _ = loaders(0)
    cfg = _config(steps=12, eval_every=0, checkpoint_every=3)
    with pytest.raises(zoo_train.NonFiniteLossError, match="Step 5: the loss is nan") as info:
        zoo_train.train(
            make_model(0), _Poisoned(train, 5), config=cfg, out=tmp_path, loss_fn=_poison_loss()
        )
    assert info.value.step == 5 and info.value.last_checkpoint == 3
    ckpt = Checkpointer(tmp_path / "checkpoints")
    try:
        assert ckpt.steps() == [3]
    finally:
        ckpt.close()
    records = zoo_train.read_metrics(tmp_path / "metrics.jsonl")
    assert records[-1]["event"] == "nonfinite" and records[-1]["action"] == "stop"


def test_nonfinite_skip_drops_the_update_and_goes_on(tmp_path):
    cfg = _config(steps=8, eval_every=0, checkpoint_every=1, keep=10, on_nonfinite="skip")
    train, _ = loaders(0)
    data = _Poisoned(train, 5)
    result = zoo_train.train(make_model(0), data, config=cfg, out=tmp_path, loss_fn=_poison_loss())
    assert result.step == 8 and int(result.state.skipped) == 1
    assert all(np.isfinite(p).all() for p in _params(result))
    ckpt = Checkpointer(tmp_path / "checkpoints")
    try:
        template = result.state
        s4, s5 = ckpt.restore_step(4, template).state, ckpt.restore_step(5, template).state
    finally:
        ckpt.close()
    # Step 5's update was dropped: parameters and optimizer state equal step 4's.
    _assert_same(
        _params(eqx.filter((s4.params, s4.opt_state), eqx.is_array)),
        _params(eqx.filter((s5.params, s5.opt_state), eqx.is_array)),
    )
    assert int(s5.step) == 5 and int(s5.skipped) == 1
    skips = [
        r
        for r in zoo_train.read_metrics(tmp_path / "metrics.jsonl")
        if r.get("event") == "nonfinite"
    ]
    assert [(r["step"], r["action"]) for r in skips] == [(5, "skip")]


def test_an_update_that_overflows_is_never_kept_or_saved(tmp_path):
    # A finite loss and gradient, but a learning rate past float32's range: every update is
    # infinite. Checked on the device, so not even step 1's state is kept.
    huge = OptimizerConfig(lr=1e39, warmup_steps=0)
    train, _ = loaders(0)
    cfg = _config(steps=3, optimizer=huge, eval_every=0, checkpoint_every=1)
    with pytest.raises(zoo_train.NonFiniteLossError, match="Step 1: the update made") as info:
        zoo_train.train(make_model(0), train, config=cfg, out=tmp_path / "stop")
    assert info.value.last_checkpoint is None
    assert not list((tmp_path / "stop" / "checkpoints").glob("[0-9]*"))  # nothing saved

    initial = _params(eqx.filter(make_model(0), eqx.is_array))
    train, _ = loaders(0)
    cfg = _config(steps=3, optimizer=huge, eval_every=0, checkpoint_every=1, on_nonfinite="skip")
    result = zoo_train.train(make_model(0), train, config=cfg, out=tmp_path / "skip")
    assert int(result.state.skipped) == 3
    ckpt = Checkpointer(tmp_path / "skip" / "checkpoints")
    try:
        assert ckpt.steps() == [2, 3]  # keep=2
        for step in ckpt.steps():
            saved = ckpt.restore_step(step, result.state).state
            _assert_same(_params(eqx.filter(saved.params, eqx.is_array)), initial)
            assert all(np.isfinite(x).all() for x in _params(saved))
    finally:
        ckpt.close()


def test_a_tensorstore_error_is_cut_to_its_status_cause_and_the_item_it_names():
    from zoo_train.checkpoint._reports import brief

    path = "/runs/a/checkpoints/6/state/ocdbt.process_0/d/7a67c9c0"
    error = ValueError(
        'DATA_LOSS: Error opening "zarr3" driver: Error reading local file "'
        f'{path}": 0x00000000; at byte 4 [tensorstore_spec={{"driver": "zarr3"}}] '
        "<bound method pybind11_detail_function_record_v1_system of <x>>"
    )
    # The step's own directory is in the sentence around it; the item (state) is not.
    assert brief(error) == "DATA_LOSS: 0x00000000; at byte 4 in …/state/ocdbt.process_0/d/7a67c9c0"
