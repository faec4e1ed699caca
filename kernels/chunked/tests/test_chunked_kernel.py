"""Registration, selection, the block-size policy, the support check and JAX transformations."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from chunked_helpers import max_error, random_inputs, reference

import zoo_attention
import zoo_chunked
from zoo_chunked import (
    DEFAULT_BLOCKS,
    ENV_BLOCK_KV,
    ENV_BLOCK_Q,
    BlockSizes,
    ChunkedKernel,
    resolve_block_sizes,
    split_length,
)


def test_registered_through_the_entry_point_with_its_version() -> None:
    kernel = zoo_attention.get_kernel("chunked")
    assert kernel is zoo_chunked.KERNEL
    assert kernel.version == importlib.metadata.version("zoo-chunked") == zoo_chunked.__version__
    assert kernel.platforms == ("cpu",)


def test_default_on_cpu_ahead_of_xla(resolution_log: zoo_attention.ResolutionLog) -> None:
    names = [k.name for k in zoo_attention.default_order("cpu")]
    assert names.index("chunked") < names.index("xla")
    q, k, v, _ = random_inputs(np.random.default_rng(), 1, 20, 20, 2, 1, 8)
    zoo_attention.dot_product_attention(q, k, v, is_causal=True)
    assert resolution_log.last.kernel == "chunked"
    assert resolution_log.last.source == "default"


@pytest.mark.parametrize("platform", ["gpu", "tpu"])
def test_opt_in_on_accelerators(platform: str) -> None:
    assert "chunked" not in [k.name for k in zoo_attention.default_order(platform)]


def test_selected_by_name_and_by_environment(
    monkeypatch: pytest.MonkeyPatch, resolution_log: zoo_attention.ResolutionLog
) -> None:
    rng = np.random.default_rng()
    q, k, v, _ = random_inputs(rng, 1, 20, 20, 2, 1, 8)
    zoo_attention.dot_product_attention(q, k, v, implementation="chunked")
    assert resolution_log.last.kernel == "chunked"
    assert resolution_log.last.source == "argument"
    monkeypatch.setenv(zoo_attention.ENV_VAR, "chunked")
    out = zoo_attention.dot_product_attention(q, k, v, is_causal=True)
    assert resolution_log.last.kernel == "chunked"
    assert resolution_log.last.source == "environment"
    assert max_error(out, reference(q, k, v, None, is_causal=True).out) < 2e-5


def test_block_size_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_block_sizes("cpu") == BlockSizes(*DEFAULT_BLOCKS["cpu"])
    monkeypatch.setenv(ENV_BLOCK_Q, "64")
    monkeypatch.setenv(ENV_BLOCK_KV, " 96 ")
    assert resolve_block_sizes("cpu") == BlockSizes(64, 96)
    # Constructor arguments win over the environment.
    assert ChunkedKernel(block_q=8).block_sizes("cpu") == BlockSizes(8, 96)


@pytest.mark.parametrize("raw", ["0", "-4", "big", "1.5"])
def test_bad_environment_block_size_is_refused_with_its_name(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv(ENV_BLOCK_KV, raw)
    q = jnp.zeros((1, 8, 2, 8))
    with pytest.raises(ValueError, match=ENV_BLOCK_KV):
        zoo_attention.dot_product_attention(q, q, q, implementation="chunked")


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "64"])
def test_bad_constructor_block_size(bad: object) -> None:
    with pytest.raises(ValueError, match="block_q"):
        ChunkedKernel(block_q=bad)  # type: ignore[arg-type]


def test_check_refuses_unsupported_float_dtypes() -> None:
    q = jnp.zeros((1, 8, 2, 8))
    spec, _ = zoo_attention.make_spec(q, q, q)
    assert zoo_chunked.KERNEL.check(spec) is None
    reason = zoo_chunked.KERNEL.check(dataclasses.replace(spec, dtype="float8_e4m3fn"))
    assert reason is not None and "float8_e4m3fn" in reason


def test_split_length_covers_every_length_with_little_padding() -> None:
    for max_block in (1, 5, 8, 24, 100, 512):
        for length in range(1, 1200, 7):
            block, num = split_length(length, max_block)
            assert block * num >= length > block * (num - 1)
            if length <= max_block:
                assert (block, num) == (length, 1)
            else:
                align = 8 if max_block >= 8 else 1
                assert block % align == 0
                assert block <= math.ceil(max_block / align) * align
                assert block * num - length < align * num


def test_vmap_and_grad_of_vmap_match_the_batched_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # Batching rules for the custom_vjp and its data-independent loops.
    monkeypatch.setenv(ENV_BLOCK_Q, "16")
    monkeypatch.setenv(ENV_BLOCK_KV, "16")
    rng = np.random.default_rng()
    q, k, v, do = random_inputs(rng, 6, 37, 37, 4, 2, 8)
    attend = lambda q, k, v: zoo_attention.dot_product_attention(
        q, k, v, is_causal=True, implementation="chunked"
    )
    split = lambda x: x.reshape(3, 2, *x.shape[1:])
    ref = reference(q, k, v, do, is_causal=True)
    out = jax.vmap(attend)(split(q), split(k), split(v))
    assert max_error(out.reshape(q.shape), ref.out) < 2e-5
    loss = lambda *a: jnp.sum(jax.vmap(attend)(*a) * split(do))
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(split(q), split(k), split(v))
    for got, want in zip(grads, (ref.dq, ref.dk, ref.dv), strict=True):
        assert max_error(got.reshape(want.shape), want) < 1e-4
