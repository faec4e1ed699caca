"""``recording()``: the resolutions made inside a block, and only those; nested blocks; errors;
threads."""

import logging
import threading

import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention import AttentionKernel

NAMES = ("rec_a", "rec_b", "rec_c", "rec_d")


class _Echo(AttentionKernel):
    """Serves every call when named; returns the query (what it returns is not under test)."""

    def __init__(self, name: str):
        self.name = name
        self.version = "0.0.1"

    def check(self, spec):
        return None

    def __call__(self, q, k, v, ids, spec):
        return q


@pytest.fixture(autouse=True)
def kernels():
    for name in NAMES:
        zoo_attention.register_kernel(_Echo(name), replace=True)
    yield
    for name in NAMES:
        zoo_attention.unregister_kernel(name)


def _call(name: str, t: int = 5) -> None:
    q = jnp.asarray(np.random.default_rng().standard_normal((1, t, 2, 8)), jnp.float32)
    zoo_attention.dot_product_attention(q, q, q, implementation=name)


def _served(log: zoo_attention.ResolutionLog) -> list[str]:
    return [r.kernel for r in log]


def test_a_block_records_the_calls_made_inside_it_and_no_others():
    _call("rec_a")
    with zoo_attention.recording() as log:
        assert (len(log), log.last) == (0, None)
        _call("rec_b", t=3)
        _call("rec_c", t=4)
        _call("rec_b", t=6)  # the same resolution again: listed once, but it is the last
    _call("rec_d")
    assert _served(log) == ["rec_b", "rec_c"]
    assert (log.last.kernel, log.last.spec.q_len) == ("rec_b", 6)
    assert [r.source for r in log.resolutions] == ["argument", "argument"]


def test_nested_blocks_each_see_their_own_and_the_outer_sees_the_inner():
    with zoo_attention.recording() as outer:
        _call("rec_a")
        with zoo_attention.recording() as inner:
            _call("rec_b")
        with zoo_attention.recording() as second:
            _call("rec_c")
        _call("rec_d")
    assert _served(inner) == ["rec_b"]
    assert _served(second) == ["rec_c"]
    assert _served(outer) == ["rec_a", "rec_b", "rec_c", "rec_d"]


def test_an_exception_leaves_the_block_with_what_was_recorded_before_it():
    logs: list[zoo_attention.ResolutionLog] = []

    def fails_inside() -> None:
        with zoo_attention.recording() as log:
            logs.append(log)
            _call("rec_a")
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        fails_inside()
    _call("rec_b")  # after the block: not recorded there
    assert _served(logs[0]) == ["rec_a"]
    with zoo_attention.recording() as failed:
        with pytest.raises(ValueError, match="rec_nope"):
            _call("rec_nope")  # a call that resolves nothing records nothing
        _call("rec_c")  # the block still records after an error inside it
    assert _served(failed) == ["rec_c"]


def test_a_block_does_not_see_calls_made_in_another_thread():
    started, release = threading.Event(), threading.Event()

    def other() -> None:
        with zoo_attention.recording() as theirs:
            started.set()
            release.wait(timeout=30)
            _call("rec_c")
        seen.append(_served(theirs))

    seen: list[list[str]] = []
    thread = threading.Thread(target=other)
    with zoo_attention.recording() as mine:
        thread.start()
        started.wait(timeout=30)
        _call("rec_a")  # while the other thread's block is open
        release.set()
        thread.join(timeout=60)
    assert _served(mine) == ["rec_a"]
    assert seen == [["rec_c"]]


def test_the_fallback_warning_is_logged_once_per_block(monkeypatch, caplog):
    monkeypatch.setenv(zoo_attention.ENV_VAR, "not_installed_here,xla")
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        for _ in range(2):  # two runs, each warned once however many calls it makes
            with zoo_attention.recording():
                for t in (3, 4, 5):
                    zoo_attention.dot_product_attention(*[jnp.zeros((1, t, 2, 8))] * 3)
    warned = [r for r in caplog.records if "not_installed_here" in r.getMessage()]
    assert len(warned) == 2


def test_a_warning_in_a_block_is_not_repeated_around_it_or_after_it(monkeypatch, caplog):
    """A run's block nests in its caller's (a script recording what it drives): the warning
    logged in it is not logged again by the calls the caller traces after it, in its block or
    outside every block."""
    monkeypatch.setenv(zoo_attention.ENV_VAR, "not_installed_nested,xla")
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        with zoo_attention.recording():
            with zoo_attention.recording():
                zoo_attention.dot_product_attention(*[jnp.zeros((1, 3, 2, 8))] * 3)
            zoo_attention.dot_product_attention(*[jnp.zeros((1, 4, 2, 8))] * 3)
        zoo_attention.dot_product_attention(*[jnp.zeros((1, 5, 2, 8))] * 3)
    warned = [r for r in caplog.records if "not_installed_nested" in r.getMessage()]
    assert len(warned) == 1


def test_the_names_of_contract_1_1_still_work_with_a_deprecation_warning():
    with pytest.deprecated_call(match=r"recording\(\)"):
        zoo_attention.clear_resolutions()
    _call("rec_a")
    _call("rec_b")
    with pytest.deprecated_call(match="log.resolutions"):
        assert [r.kernel for r in zoo_attention.resolutions()] == ["rec_a", "rec_b"]
    with pytest.deprecated_call(match="log.last"):
        assert zoo_attention.last_resolution().kernel == "rec_b"
    with pytest.deprecated_call(match="testing.verify_count"):
        count = zoo_attention.verify_count()
    assert count == len(zoo_attention.testing.CASES) + 1
    for name in ("kernel_rows", "format_table", "verify_line", "verify"):
        with pytest.deprecated_call(match=name):
            assert callable(getattr(zoo_attention, name))
    assert "clear_resolutions" not in dir(zoo_attention)
    with pytest.raises(AttributeError, match="no_such_name"):
        zoo_attention.no_such_name  # noqa: B018
