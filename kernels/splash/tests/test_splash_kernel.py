"""What ``splash`` serves and refuses, the fallback on a machine without a TPU, the block-size
policy and the masks it builds."""

from __future__ import annotations

import logging

import jax.numpy as jnp
import numpy as np
import pytest

import zoo_attention
from zoo_attention.testing import reference_mask
from zoo_splash import (
    INTERPRET_VAR,
    KERNEL,
    choose_block_sizes,
    head_mask,
    multi_head_mask,
)


def _spec(
    t: int = 256,
    s: int | None = None,
    h: int = 128,
    dtype: str = "bfloat16",
    platform: str = "tpu",
) -> zoo_attention.AttentionSpec:
    s = t if s is None else s
    q = jnp.zeros((2, t, 8, h), dtype)
    kv = jnp.zeros((2, s, 2, h), dtype)
    spec, _ = zoo_attention.make_spec(
        q, kv, kv, is_causal=True, platform=platform, device_kind="TPU v5 lite"
    )
    return spec


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (_spec(t=200), ("q_len 200", "multiple of 128")),
        (_spec(t=256, s=100), ("kv_len 100", "multiple of 128")),
        (_spec(h=512), ("head_dim 512", "256")),
        (_spec(dtype="float16"), ("float16",)),
    ],
    ids=["q-len", "kv-len", "head-dim", "dtype"],
)
def test_check_names_what_splash_cannot_serve(
    spec: zoo_attention.AttentionSpec, words: tuple[str, ...]
) -> None:
    reason = KERNEL.check(spec)
    assert reason is not None and all(w in reason for w in words), reason


def test_check_serves_a_tpu_call_and_refuses_a_cpu_one_unless_interpreted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert KERNEL.check(_spec(t=8192, s=1024)) is None
    assert KERNEL.check(_spec(platform="cpu")) is None  # ZOO_SPLASH_INTERPRET=1 (conftest)
    monkeypatch.delenv(INTERPRET_VAR)
    reason = KERNEL.check(_spec(platform="cpu"))
    assert reason is not None and "needs a TPU" in reason and INTERPRET_VAR in reason
    assert KERNEL.check(_spec()) is None


def test_on_tpu_the_default_order_tries_splash_after_flash_tpu_and_before_xla(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    names = [k.name for k in zoo_attention.default_order("tpu")]
    assert names.index("splash") < names.index("xla"), names
    if "flash_tpu" in names:
        assert names.index("flash_tpu") < names.index("splash"), names
    assert "splash" in [k.name for k in zoo_attention.default_order("cpu")]  # interpret mode
    monkeypatch.delenv(INTERPRET_VAR)
    assert "splash" not in [k.name for k in zoo_attention.default_order("cpu")]


def test_a_named_call_splash_cannot_serve_raises_its_reason() -> None:
    q = jnp.zeros((1, 67, 2, 64), jnp.float32)
    with pytest.raises(zoo_attention.KernelUnavailableError, match="q_len 67 and kv_len 67"):
        zoo_attention.dot_product_attention(q, q, q, implementation="splash")


def test_without_interpret_mode_a_cpu_falls_back_to_xla_with_one_warning(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    resolution_log: zoo_attention.ResolutionLog,
) -> None:
    monkeypatch.delenv(INTERPRET_VAR)
    monkeypatch.setenv(zoo_attention.ENV_VAR, "splash,xla")
    rng = np.random.default_rng()
    q = jnp.asarray(rng.standard_normal((1, 128, 4, 64)), jnp.float32)
    kv = jnp.asarray(rng.standard_normal((1, 128, 2, 64)), jnp.float32)
    with caplog.at_level(logging.WARNING, logger="zoo_attention"):
        outs = [zoo_attention.dot_product_attention(q, kv, kv, is_causal=True) for _ in range(2)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "instead of splash" in warnings[0] and "needs a TPU" in warnings[0], warnings[0]
    last = resolution_log.last
    assert last is not None and last.kernel == "xla"
    assert [name for name, _ in last.skipped] == ["splash"]
    want = zoo_attention.dot_product_attention(q, kv, kv, is_causal=True, implementation="xla")
    for out in outs:
        np.testing.assert_array_equal(np.asarray(out), np.asarray(want))


@pytest.mark.parametrize(
    ("length", "block"), [(128, 128), (384, 128), (768, 256), (1024, 512), (8192, 512)]
)
def test_the_block_is_the_largest_of_512_256_128_that_divides_the_length(
    length: int, block: int
) -> None:
    sizes = choose_block_sizes(length, 640)
    assert (sizes.block_q, sizes.block_q_dkv, sizes.block_q_dq) == (block,) * 3
    assert (sizes.block_kv, sizes.block_kv_compute, sizes.block_kv_dkv) == (128,) * 3
    assert (sizes.block_kv_dkv_compute, sizes.block_kv_dq) == (128,) * 2
    assert not sizes.use_fused_bwd_kernel


def test_a_length_splash_cannot_tile_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="q_len 200"):
        choose_block_sizes(200, 256)


@pytest.mark.parametrize(
    ("t", "s", "causal", "window"),
    [
        (256, 256, False, None),
        (256, 256, True, None),
        (384, 128, True, None),
        (384, 256, False, (5, 40)),
        (256, 384, True, (30, 7)),
    ],
)
def test_the_mask_is_the_contracts(
    t: int, s: int, causal: bool, window: tuple[int, int] | None
) -> None:
    mask = head_mask(t, s, causal, window)
    got = np.asarray(mask[0:t, 0:s])
    want = reference_mask(1, t, s, is_causal=causal, local_window=window)[0]
    np.testing.assert_array_equal(got, want)


def test_masks_are_built_once_and_lazily() -> None:
    first = multi_head_mask(8, 4096, 4096, True, (1024, 0))
    assert multi_head_mask(8, 4096, 4096, True, (1024, 0)) is first
    assert all(m is first.masks[0] for m in first.masks)
    # A computed mask, not a [T, S] array: only the query positions are stored.
    assert not hasattr(first.masks[0], "array")
    assert first.masks[0].q_sequence.nbytes == 4096 * 4
