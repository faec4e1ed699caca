"""The loop's parts that keep the device busy: the batch prefetcher and the late metric reads."""

import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest

from zoo_train._step_metrics import PackedMetrics, StepMetrics
from zoo_train.loop import Prefetcher


def test_the_prefetcher_hands_out_every_result_in_order_and_stops_at_count():
    made = []

    def produce():
        made.append(len(made))
        return made[-1]

    feed = Prefetcher(produce, 7, depth=2)
    try:
        assert [feed.next() for _ in range(7)] == list(range(7))
        with pytest.raises(RuntimeError, match="ended early"):
            feed.next()
    finally:
        feed.close()
    assert made == list(range(7))


def test_the_prefetcher_works_ahead_but_no_further_than_its_depth():
    made = []
    feed = Prefetcher(lambda: made.append(1) or len(made), 100, depth=2)
    try:
        time.sleep(0.5)
        # Two waiting in the queue and one made but not yet placed in it.
        assert 2 <= len(made) <= 3
        assert feed.next() == 1
    finally:
        feed.close()
    assert not any(t.name == "zoo-prefetch" and t.is_alive() for t in threading.enumerate())


def test_an_error_while_producing_is_raised_by_next_in_its_turn():
    calls = []

    def produce():
        calls.append(1)
        if len(calls) == 3:
            raise ValueError("bad document")
        return len(calls)

    feed = Prefetcher(produce, 10)
    try:
        assert feed.next() == 1 and feed.next() == 2
        with pytest.raises(ValueError, match="bad document"):
            feed.next()
    finally:
        feed.close()


def test_steps_are_waited_for_lag_steps_late_and_read_only_when_due_or_drained():
    seen, ready = [], []
    metrics = StepMetrics(
        lambda step, m: seen.append((step, m["loss"])),
        on_ready=lambda step, t: ready.append(step),
        due=lambda step: step % 4 == 0,
        lag=2,
    )
    rng = np.random.default_rng()
    losses = rng.normal(size=10).astype(np.float32)
    for step, loss in enumerate(losses, start=1):
        metrics.push(step, PackedMetrics.pack({"loss": jnp.asarray(loss), "finite": True}))
        # Every step up to `step - 2` is seen finished; the last two may still run.
        assert ready == list(range(1, max(step - 2, 0) + 1))
        # Values are read only up to the last due step that is two steps old.
        last_due = max((s for s in range(1, step - 1) if s % 4 == 0), default=0)
        assert [s for s, _ in seen] == list(range(1, last_due + 1))
    metrics.drain()
    assert ready == list(range(1, 11)) and [s for s, _ in seen] == list(range(1, 11))
    np.testing.assert_array_equal([v for _, v in seen], losses)


def test_packed_metrics_unpack_to_the_same_values_in_one_vector():
    rng = np.random.default_rng()
    plain = {"loss": jnp.float32(rng.normal()), "grad_norm": jnp.float32(rng.random()),
             "finite": jnp.bool_(True), "update_finite": jnp.bool_(False)}  # fmt: skip
    packed = PackedMetrics.pack(plain)
    assert packed.values.shape == (4,)
    values = packed.unpack()
    assert values == {k: (bool(v) if v.dtype == bool else float(v)) for k, v in plain.items()}
    assert values["finite"] is True and values["update_finite"] is False
