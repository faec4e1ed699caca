"""Pieces of multi-process runs that one process can check: the settings, a process's rows of
a batch, and labelled output. (Runs of several processes: tests/test_multihost.py.)"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from tiny_lm import random_docs

from zoo_train import parallel
from zoo_train.data import PackedLoader


def test_flags_override_the_environment():
    env = {"ZOO_COORDINATOR": "h:1", "ZOO_NUM_PROCESSES": "4", "ZOO_PROCESS_ID": "3"}
    config = parallel.ProcessConfig.from_sources({"process_id": 1}, env)
    assert config == parallel.ProcessConfig("h:1", 4, 1)
    config.check()
    assert not parallel.ProcessConfig.from_sources({}, {}).given


@pytest.mark.parametrize(
    ("config", "needle"),
    [
        (parallel.ProcessConfig("h:1", 2, 2), "--process-id 2 is outside 0…1"),
        (parallel.ProcessConfig("h:1", 2, -1), "--process-id -1 is outside 0…1"),
        (parallel.ProcessConfig(None, 2, 0), "--coordinator missing"),
        (parallel.ProcessConfig("h", 2, 0), "--coordinator must be HOST:PORT"),
        (parallel.ProcessConfig("h:1", 0, 0), "--num-processes must be at least 1"),
    ],
)
def test_bad_process_settings_name_the_flag(config, needle):
    with pytest.raises(ValueError, match=needle):
        config.check()


def test_an_environment_variable_that_is_not_a_number_is_named():
    with pytest.raises(ValueError, match="ZOO_PROCESS_ID='one' must be an integer"):
        parallel.ProcessConfig.from_sources({}, {"ZOO_PROCESS_ID": "one"})


def test_a_process_reads_only_its_rows_and_the_position_stays_global():
    rng = np.random.default_rng()
    seed = int(rng.integers(1 << 30))
    whole = PackedLoader(random_docs(seed), seq_len=16, seed=seed)
    part = PackedLoader(random_docs(seed), seq_len=16, seed=seed)
    for _ in range(12):  # across epoch boundaries
        n = int(rng.integers(4, 40))
        start = int(rng.integers(0, n - 1))
        stop = int(rng.integers(start + 1, n + 1))
        want = whole.next_batch(n)
        got = part.next_batch(n, rows=(start, stop))
        for key in want:
            np.testing.assert_array_equal(got[key], want[key][start:stop])
        assert part.state_dict() == whole.state_dict()
    with pytest.raises(ValueError, match="`rows` must be a range within the batch of 8"):
        part.next_batch(8, rows=(3, 9))


def test_one_process_holds_every_row_of_a_batch():
    layout = parallel.BatchLayout(parallel.make_mesh(), parallel.make_rules(), 8)
    assert layout.local == (0, 8)
    batch = {"x": np.arange(24, dtype=np.int32).reshape(8, 3)}
    placed = layout.place(layout.local_part(batch))
    np.testing.assert_array_equal(np.asarray(placed["x"]), batch["x"])


LABELLED = """
import os, sys
from zoo_train.parallel._output import label_output, restore_output
print("before")
label_output("[1/2] ")
print("python line"); sys.stdout.write("bar 1\\rbar 2\\n"); sys.stdout.flush()
os.write(1, b"[Gloo] Rank 1 is connected to 1 peer ranks. Expected ... is : 1\\n")
os.write(1, b"native line\\nnative tail")  # what C++ code writes, no newline at the end
os.write(2, b"to stderr\\n")
restore_output()
print("after")
"""


def test_every_line_of_a_labelled_process_starts_with_its_label():
    proc = subprocess.run([sys.executable, "-c", LABELLED], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().split("\n") == [
        "before",
        "[1/2] python line",
        "[1/2] bar 1\r[1/2] bar 2",
        "[1/2] native line",
        "[1/2] native tailafter",
        "",
    ]
    assert proc.stderr.decode() == "[1/2] to stderr\n"


@pytest.mark.parametrize(
    ("log", "sentence"),
    [
        (
            b"absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending "
            b"heartbeats):\n1\nThe tasks have crashed.",
            "process 1 stopped sending heartbeats to the coordinator; stopping.",
        ),
        (
            b"absl::Status: UNAVAILABLE: Failed to send RPC to coordination service. Either the "
            b"leader task was preempted/died",
            "the coordinator (process 0) is gone; stopping.",
        ),
        (b"absl::Status: INTERNAL: something else", "reported a fatal error; stopping."),
    ],
)
def test_jax_fatal_coordination_logs_become_one_sentence(log, sentence):
    from zoo_train.parallel._output import lost_process_sentence

    text = lost_process_sentence(log)
    assert sentence in text and text.endswith("resume from the last checkpoint.")
    assert "\n" not in text
