"""Gradients against plain autodiff of the ``xla`` reference kernel, inside ``jax.jit``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from chunked_helpers import packed_ids, random_inputs

import zoo_attention
from zoo_chunked import ENV_BLOCK_KV, ENV_BLOCK_Q


def _rel(a: jax.Array, b: jax.Array) -> float:
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a64 - b64)) / max(1.0, float(np.max(np.abs(b64)))))


CASES: list[tuple[str, dict[str, Any]]] = [
    # Default blocks (256 on CPU): T=601 is three padded query/key blocks of 208.
    ("default-blocks-causal-gqa", dict(t=601, s=601, n=4, k=2, is_causal=True)),
    (
        "small-blocks-window-cap",
        dict(t=90, s=90, n=4, k=4, local_window_size=(9, 3), logits_soft_cap=3.0, blocks=(16, 32)),
    ),
    ("small-blocks-separate-ids", dict(t=70, s=45, n=8, k=2, segments=True, blocks=(32, 16))),
]


# small-blocks-separate-ids runs small blocks against autodiff, and the conformance cases with
# small blocks (all-bf16, sinks-all-f32) a window and a soft cap against the float64 gradients.
FULL = ("small-blocks-window-cap",)


@pytest.mark.parametrize(
    ("name", "case"),
    [pytest.param(*c, marks=pytest.mark.full) if c[0] in FULL else c for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_gradients_match_xla_autodiff(
    name: str,
    case: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    resolution_log: zoo_attention.ResolutionLog,
) -> None:
    case = dict(case)
    rng = np.random.default_rng()
    t, s, n, k = case.pop("t"), case.pop("s"), case.pop("n"), case.pop("k")
    if "blocks" in case:
        bq, bk = case.pop("blocks")
        monkeypatch.setenv(ENV_BLOCK_Q, str(bq))
        monkeypatch.setenv(ENV_BLOCK_KV, str(bk))
    if case.pop("segments", False):
        case["segment_ids"] = (packed_ids(rng, 1, t, 3), packed_ids(rng, 1, s, 3))
    q, kk, v, w = random_inputs(rng, 1, t, s, n, k, 32)

    def loss(impl: str, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        out = zoo_attention.dot_product_attention(q, k, v, implementation=impl, **case)
        # A non-linear loss, so the cotangent differs per element.
        return jnp.sum(jnp.sin(out) * w)

    grad = lambda impl: jax.jit(jax.value_and_grad(lambda *a: loss(impl, *a), argnums=(0, 1, 2)))
    value, grads = grad("chunked")(q, kk, v)
    assert resolution_log.last.kernel == "chunked"
    want_value, want_grads = grad("xla")(q, kk, v)
    assert abs(float(value) - float(want_value)) <= 1e-4 * max(1.0, abs(float(want_value)))
    for got, want in zip(grads, want_grads, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert _rel(got, want) < 1e-4, name


def test_gradients_through_projections_under_jit() -> None:
    # A small attention layer: the kernel composes with ordinary autodiff around it.
    rng = np.random.default_rng()
    b, t, d, n, k, h = 2, 40, 24, 4, 2, 8
    x = jnp.asarray(rng.standard_normal((b, t, d)), jnp.float32)
    params = {
        name: jnp.asarray(rng.standard_normal(shape) / np.sqrt(d), jnp.float32)
        for name, shape in (
            ("q", (d, n * h)),
            ("k", (d, k * h)),
            ("v", (d, k * h)),
            ("o", (n * h, d)),
        )
    }

    def layer(params: dict[str, jax.Array], impl: str) -> jax.Array:
        q = (x @ params["q"]).reshape(b, t, n, h)
        kk = (x @ params["k"]).reshape(b, t, k, h)
        v = (x @ params["v"]).reshape(b, t, k, h)
        out = zoo_attention.dot_product_attention(q, kk, v, is_causal=True, implementation=impl)
        return jnp.mean((out.reshape(b, t, n * h) @ params["o"]) ** 2)

    got = jax.jit(jax.grad(lambda p: layer(p, "chunked")))(params)
    want = jax.jit(jax.grad(lambda p: layer(p, "xla")))(params)
    for name in params:
        assert _rel(got[name], want[name]) < 1e-4, name
