"""Rotary position embeddings (the "rotate half" layout, or DeepSeek's interleaved pairs), with
linear, Llama 3 and YaRN scaling."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

ScalingKind = Literal["none", "linear", "llama3", "yarn"]


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """How the rotary frequencies are rescaled for longer contexts.

    Attributes:
        kind: ``"none"``; ``"linear"`` (every frequency divided by ``factor``); ``"llama3"``
            (Llama 3.1: low frequencies divided by ``factor``, high ones kept, a smooth ramp
            between, set by ``low_freq_factor``, ``high_freq_factor`` and
            ``original_max_position``); or ``"yarn"`` (YaRN, as gpt-oss and DeepSeek-V3 use
            it: frequencies between ``beta_fast`` and ``beta_slow`` rotations over
            ``original_max_position`` ramp from kept to divided by ``factor``, and cos/sin are
            multiplied by :meth:`attention_factor`).
        beta_fast, beta_slow, mscale, mscale_all_dim, truncate, yarn_attention_factor: YaRN's
            parameters, as in ``transformers``' ``rope_parameters``.
    """

    kind: ScalingKind = "none"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    yarn_attention_factor: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("none", "linear", "llama3", "yarn"):
            raise ValueError(
                "rope scaling `kind` must be 'none', 'linear', 'llama3' or 'yarn', got "
                f"{self.kind!r}."
            )
        if self.kind != "none" and not self.factor > 0:
            raise ValueError(f"rope scaling `factor` must be > 0, got {self.factor!r}.")
        if self.kind == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(
                "llama3 rope scaling needs `high_freq_factor` > `low_freq_factor`, got "
                f"{self.high_freq_factor} and {self.low_freq_factor}."
            )
        if self.kind == "yarn" and not (self.beta_fast > 0 and self.beta_slow > 0):
            raise ValueError(
                f"yarn rope scaling needs `beta_fast` and `beta_slow` > 0, got {self.beta_fast} "
                f"and {self.beta_slow}."
            )

    def attention_factor(self) -> float:
        """What YaRN multiplies cos and sin by (1 for the other kinds), as ``transformers``
        computes it: ``0.1 ln(factor) + 1``, or the ratio of the ``mscale`` and
        ``mscale_all_dim`` versions of it when both are set."""
        if self.kind != "yarn":
            return 1.0
        if self.yarn_attention_factor is not None:
            return float(self.yarn_attention_factor)
        if self.mscale and self.mscale_all_dim:
            return yarn_mscale(self.factor, self.mscale) / yarn_mscale(
                self.factor, self.mscale_all_dim
            )
        return yarn_mscale(self.factor)


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction ``0.1 · mscale · ln(factor) + 1`` (1 for ``factor <= 1``)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn_frequencies(head_dim: int, theta: float, s: RopeScaling) -> np.ndarray:
    # transformers' _compute_yarn_parameters, in float32 where it computes in float32.
    def correction_dim(rotations: float) -> float:
        return (head_dim * math.log(s.original_max_position / (rotations * 2 * math.pi))) / (
            2 * math.log(theta)
        )

    low, high = correction_dim(s.beta_fast), correction_dim(s.beta_slow)
    if s.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # no singular ramp
    half = head_dim // 2
    ramp = np.clip((np.arange(half, dtype=np.float32) - low) / (high - low), 0, 1)
    pos = np.float32(theta) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim))
    extrapolation = (1.0 / pos).astype(np.float32)
    interpolation = (1.0 / (np.float32(s.factor) * pos)).astype(np.float32)
    keep = (1 - ramp).astype(np.float32)
    return (interpolation * (1 - keep) + extrapolation * keep).astype(np.float32)


def rope_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None = None) -> np.ndarray:
    """Inverse frequencies ``[head_dim // 2]`` as float32, computed as Hugging Face does."""
    if head_dim % 2:
        raise ValueError(f"rotary embeddings need an even `head_dim`, got {head_dim}.")
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    inv_freq = (1.0 / (np.float32(theta) ** exponent)).astype(np.float32)
    scaling = scaling or RopeScaling()
    if scaling.kind == "yarn":
        return _yarn_frequencies(head_dim, theta, scaling)
    if scaling.kind == "linear":
        inv_freq = inv_freq / np.float32(scaling.factor)
    elif scaling.kind == "llama3":
        low_wavelen = scaling.original_max_position / scaling.low_freq_factor
        high_wavelen = scaling.original_max_position / scaling.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq)
        smooth = (scaling.original_max_position / wavelen - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv_freq = np.where(medium, smoothed, scaled)
    return inv_freq.astype(np.float32)


def rotate_half(x: Float[Array, "*B H"]) -> Float[Array, "*B H"]:
    """``[x1, x2] -> [-x2, x1]`` over the last axis."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


class Rotary(eqx.Module):
    """Applies rotary embeddings to ``[B, T, N, H]`` heads at integer ``positions [B, T]``.

    Angles and their cos/sin are computed in float32 (times YaRN's attention factor), then
    cast to the input dtype. ``interleaved`` rotates the pairs ``(x0, x1), (x2, x3), ...``
    (DeepSeek's ``rope_interleave``) and returns the rotated even entries then the odd ones,
    as ``transformers`` does (queries and keys alike, so their products are those of the
    interleaved layout).
    """

    head_dim: int = eqx.field(static=True)
    theta: float = eqx.field(static=True)
    scaling: RopeScaling = eqx.field(static=True)
    interleaved: bool = eqx.field(static=True, default=False)

    def __init__(
        self,
        head_dim: int,
        *,
        theta: float = 10000.0,
        scaling: RopeScaling | None = None,
        interleaved: bool = False,
    ) -> None:
        rope_frequencies(head_dim, theta, scaling)  # validates
        self.head_dim = head_dim
        self.theta = float(theta)
        self.scaling = scaling or RopeScaling()
        self.interleaved = interleaved

    def cos_sin(
        self, positions: Int[Array, "B T"]
    ) -> tuple[Float[Array, "B T H"], Float[Array, "B T H"]]:
        """float32 ``cos`` and ``sin`` tables for ``positions``, duplicated over both halves."""
        inv_freq = jnp.asarray(rope_frequencies(self.head_dim, self.theta, self.scaling))
        angles = positions.astype(jnp.float32)[..., None] * inv_freq
        angles = jnp.concatenate([angles, angles], axis=-1)
        factor = self.scaling.attention_factor()
        if factor == 1.0:
            return jnp.cos(angles), jnp.sin(angles)
        return jnp.cos(angles) * factor, jnp.sin(angles) * factor

    def __call__(
        self, x: Float[Array, "B T N H"], positions: Int[Array, "B T"]
    ) -> Float[Array, "B T N H"]:
        cos, sin = self.cos_sin(positions)
        cos = cos[:, :, None, :].astype(x.dtype)
        sin = sin[:, :, None, :].astype(x.dtype)
        if self.interleaved:
            half = self.head_dim // 2
            cos, sin = cos[..., :half], sin[..., :half]
            even, odd = x[..., 0::2], x[..., 1::2]
            return jnp.concatenate([even * cos - odd * sin, odd * cos + even * sin], axis=-1)
        return x * cos + rotate_half(x) * sin
