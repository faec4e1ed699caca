"""The summed loss (``linear_cross_entropy_loss``) against plain autodiff of the unfused loss
in float64: the logits of the whole vocabulary, ``log_softmax``, ``Σ w · (ce + z · log_z²)``,
differentiated by ``jax.grad``. ``fused_xla`` computes its gradients in the forward pass, tile
by tile (tiles of 8 tokens here, so every call crosses several and a padded last one), and the
scalar cotangent scales them in the backward pass; the hand-written float64 reference of the
conformance suite is not involved."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from zoo_attention.cross_entropy import linear_cross_entropy_loss
from zoo_attention.cross_entropy._fused_policy import TILE_ENV

CASES = {
    # name: (head_layout, soft_cap, temperature, z_loss, weighted)
    "dv-weights-z": ("dv", None, 1.0, 0.3, True),
    "vd-tied-soft-cap": ("vd", 5.0, 1.0, 0.0, True),
    "vd-temperature-z-unweighted": ("vd", None, 0.7, 0.1, False),
}
TOKENS, DIM, VOCAB = (3, 7), 16, 131  # 21 tokens: tiles of 8 end part-way, 131 is prime


def _plain_loss(hidden, head, targets, weights, layout, cap, temperature, z):
    """The unfused loss in float64, for ``jax.grad``."""
    logits = hidden @ (head if layout == "dv" else head.T)
    if cap is not None:
        logits = cap * jnp.tanh(logits / cap)
    logits = logits / temperature
    log_z = jax.nn.logsumexp(logits, axis=-1)
    safe = jnp.where(weights != 0, targets, 0)
    ce = log_z - jnp.take_along_axis(logits, safe[..., None], axis=-1)[..., 0]
    counted = weights != 0  # a token of weight 0 reads no target and gives exact zeros
    return jnp.sum(jnp.where(counted, weights * (ce + z * log_z**2), 0.0))


@pytest.mark.parametrize("implementation", ["fused_xla", "logits"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_summed_loss_and_gradients_equal_autodiff_of_the_plain_loss(
    case: str, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout, cap, temperature, z, weighted = CASES[case]
    rng = np.random.default_rng(sorted(CASES).index(case))
    hidden = rng.normal(0.0, 1.0, (*TOKENS, DIM))
    head_shape = (DIM, VOCAB) if layout == "dv" else (VOCAB, DIM)
    head = rng.normal(0.0, 2.0 / np.sqrt(DIM), head_shape)
    targets = rng.integers(0, VOCAB, TOKENS)
    weights = np.ones(TOKENS)
    if weighted:
        weights = rng.uniform(0.25, 2.0, TOKENS) * (rng.uniform(size=TOKENS) < 0.7)
        weights[0, 0] = 0.0
        targets = np.where(weights == 0, -100, targets)  # never read
    g = 1.7  # the loss's cotangent: the backward pass scales the forward's gradients

    monkeypatch.setenv(TILE_ENV, "8")

    def fused(h, w):
        loss, metrics = linear_cross_entropy_loss(
            h,
            w,
            jnp.asarray(targets, jnp.int32),
            jnp.asarray(weights, jnp.float32) if weighted else None,
            z_loss=z,
            head_layout=layout,
            soft_cap=cap,
            temperature=temperature,
            implementation=implementation,
        )
        return g * loss, (loss, metrics)

    f32 = [jnp.asarray(x, jnp.float32) for x in (hidden, head)]
    (_, (loss, metrics)), (d_hidden, d_head) = jax.jit(
        jax.value_and_grad(fused, argnums=(0, 1), has_aux=True)
    )(*f32)

    with jax.enable_x64(True):
        args = (jnp.asarray(targets), jnp.asarray(weights), layout, cap, temperature)
        h64, w64 = (jnp.asarray(np.asarray(x, np.float64)) for x in f32)
        want, (want_dh, want_dw) = jax.value_and_grad(
            lambda h, w: _plain_loss(h, w, *args, z), argnums=(0, 1)
        )(h64, w64)
        want_ce = _plain_loss(h64, w64, *args, 0.0)
        want_dh, want_dw = np.asarray(want_dh) * g, np.asarray(want_dw) * g

    np.testing.assert_allclose(loss, want, rtol=2e-6)
    np.testing.assert_allclose(metrics["ce"], want_ce, rtol=2e-6)
    if z:
        want_z = (float(want) - float(want_ce)) / z
        np.testing.assert_allclose(metrics["log_z_squared"], want_z, rtol=2e-5)
    for got, ref in ((d_hidden, want_dh), (d_head, want_dw)):
        assert got.dtype == jnp.float32
        assert np.max(np.abs(np.asarray(got, np.float64) - ref)) <= 2e-6 * np.max(np.abs(ref))
    if weighted:  # a token of weight 0 gets no gradient at all
        assert np.all(np.asarray(d_hidden)[weights == 0] == 0)
