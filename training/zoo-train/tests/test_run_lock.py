"""One training process per output directory: a second one is refused at once, naming the
holder; a lock left by a killed process is taken over with a note."""

from __future__ import annotations

import json
import logging
import socket

import pytest
from lock_holder import held_lock

import zoo_train
from zoo_train.checkpoint import _lock
from zoo_train.cli import main
from zoo_train.testing import write_corpus


def test_second_training_process_is_refused_naming_the_holder(tmp_path, capsys):
    run = tmp_path / "run"
    write_corpus(tmp_path / "corpus", files=2, lines=5)
    with held_lock(run) as pid:
        code = main(
            ["train", "--data", str(tmp_path / "corpus"), "--out", str(run), "--steps", "2"]
        )
        err = capsys.readouterr().err.strip()
        assert code == 2, err
        assert len(err.splitlines()) == 1 and err.endswith("."), err
        assert f"process {pid} on host {socket.gethostname()}" in err, err
        # The library call is refused too, before it builds or writes anything.
        with pytest.raises(zoo_train.RunLockedError, match=f"process {pid} "):
            zoo_train.train(None, None, config=zoo_train.TrainConfig(steps=1), out=run)
        with pytest.raises(zoo_train.RunLockedError, match=f"process {pid} "):
            zoo_train.finetune(None, None, config=zoo_train.TrainConfig(steps=1), out=run)
    assert sorted(p.name for p in run.iterdir()) == [_lock.LOCK_FILE]  # nothing else written
    # Once the holder is gone the directory is free again, and the lock is reentrant.
    with _lock.run_lock(run), _lock.run_lock(run):
        pass
    assert (run / _lock.LOCK_FILE).read_text() == ""  # released cleanly: no holder recorded


def test_lock_of_a_killed_process_is_taken_over_with_a_note(tmp_path, caplog):
    run = tmp_path / "run"
    with held_lock(run) as pid:
        pass  # killed (SIGKILL) on leaving the block: the kernel freed the lock, the record stays
    assert json.loads((run / _lock.LOCK_FILE).read_text())["pid"] == pid
    with caplog.at_level(logging.WARNING, logger="zoo_train"), _lock.run_lock(run):
        record = json.loads((run / _lock.LOCK_FILE).read_text())
    assert "took over the lock" in caplog.text and f"process {pid} on host" in caplog.text
    assert record["pid"] != pid and record["host"] == socket.gethostname()
