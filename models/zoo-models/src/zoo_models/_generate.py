"""Autoregressive generation with the KV cache, in one jitted ``lax.while_loop``.

The prompt is run through ``model.decode`` once (prefill), then one token per step. Rows that
emit a stop token are marked done; their later positions hold ``pad_id``, and the loop exits
early once every row is done. Step ``i`` samples with ``jax.random.fold_in(key, i)``, so a fixed
key gives the same tokens on every run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._sampling import sample_logits

__all__ = ["GenerationConfig", "generate", "left_pad"]


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
    """How to pick tokens (frozen, validated on construction).

    Attributes:
        max_new_tokens: tokens appended to the prompt (the output has ``T0 + max_new_tokens``).
        temperature: logits are divided by it before filtering (> 0; ignored when greedy).
        top_k: keep only the k most likely tokens (``None``: no limit).
        top_p: keep the smallest set of tokens with probability mass >= top_p (``None``: all).
        greedy: argmax decoding (no key needed).
        stop_tokens: ids that end a row; the stop token itself is kept in the output.
        pad_id: written after a row's stop token (default: the first stop token, else 0).
    """

    max_new_tokens: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    greedy: bool = False
    stop_tokens: tuple[int, ...] = ()
    pad_id: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive int, got {self.max_new_tokens!r}.")
        if not self.greedy and not float(self.temperature) > 0.0:
            raise ValueError(
                f"temperature must be > 0, got {self.temperature!r}; use greedy=True for argmax."
            )
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be a positive int or None, got {self.top_k!r}.")
        if self.top_p is not None and not 0.0 < float(self.top_p) <= 1.0:
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p!r}.")
        object.__setattr__(self, "stop_tokens", tuple(int(t) for t in self.stop_tokens))

    @property
    def resolved_pad_id(self) -> int:
        """The id written after a row is done."""
        if self.pad_id is not None:
            return int(self.pad_id)
        return self.stop_tokens[0] if self.stop_tokens else 0


def generate(
    model: Any,
    prompt_ids: Int[Array, "B T0"],
    *,
    prompt_mask: Bool[Array, "B T0"] | None = None,
    max_new_tokens: int | None = None,
    key: PRNGKeyArray | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    stop_tokens: tuple[int, ...] | list[int] = (),
    greedy: bool = False,
    pad_id: int | None = None,
    config: GenerationConfig | None = None,
) -> Int[Array, "B T0+max_new_tokens"]:
    """Continue each prompt row by ``max_new_tokens`` tokens.

    Args:
        model: a zoo model (``init_cache(batch, max_len)`` and ``decode(ids, cache)``).
        prompt_ids: int ``[B, T0]``. Prompts of different lengths are left-padded (see
            :func:`left_pad`) and described by ``prompt_mask``.
        prompt_mask: bool ``[B, T0]``, ``False`` at padding; each row is padding then tokens
            (left padding). Padding is never attended to and positions count real tokens
            only, so a padded row continues exactly as it would alone.
        key: PRNG key for sampling; required unless ``greedy``.
        max_new_tokens, temperature, top_k, top_p, stop_tokens, greedy, pad_id: as in
            :class:`GenerationConfig`.
        config: a :class:`GenerationConfig` instead of the keyword settings (not both).

    Returns:
        int32 ``[B, T0 + max_new_tokens]``: the prompt (padding included, as given), then
        the new tokens; after a row's stop token, ``pad_id``.
    """
    if config is None:
        if max_new_tokens is None:
            raise ValueError("Pass max_new_tokens (or a GenerationConfig as config=).")
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            greedy=greedy,
            stop_tokens=tuple(stop_tokens),
            pad_id=pad_id,
        )
    elif max_new_tokens is not None:
        raise ValueError("Pass either config= or max_new_tokens=, not both.")
    prompt_ids = jnp.asarray(prompt_ids)
    if prompt_ids.ndim != 2 or prompt_ids.shape[1] < 1:
        raise ValueError(
            f"prompt_ids must be int [batch, length>=1], got shape {tuple(prompt_ids.shape)}."
        )
    if not jnp.issubdtype(prompt_ids.dtype, jnp.integer):
        raise ValueError(f"prompt_ids must be integer token ids, got dtype {prompt_ids.dtype}.")
    _check_fits(model, prompt_ids, config.max_new_tokens)
    if prompt_mask is None:
        prompt_mask = jnp.ones(prompt_ids.shape, bool)
    else:
        prompt_mask = _check_mask(prompt_mask, prompt_ids.shape)
    if not config.greedy and key is None:
        raise ValueError("Sampling needs key=jax.random.key(seed); or pass greedy=True.")
    if key is None:
        key = jax.random.key(0)  # unused by greedy decoding; keeps one traced signature
    # Only what changes shapes or code paths is static; the rest is traced, so changing
    # temperature, top_p, stop ids or pad_id reuses the compiled loop.
    static = _Static(
        max_new_tokens=config.max_new_tokens,
        greedy=config.greedy,
        top_k=config.top_k,
        use_top_p=config.top_p is not None,
        stop_slots=_stop_slots(len(config.stop_tokens)),
    )
    stops = np.full((static.stop_slots,), -1, np.int32)  # -1 never matches a token
    stops[: len(config.stop_tokens)] = config.stop_tokens
    return _generate(
        model,
        prompt_ids.astype(jnp.int32),
        prompt_mask,
        key,
        jnp.float32(config.temperature if not config.greedy else 1.0),
        jnp.float32(1.0 if config.top_p is None else config.top_p),
        jnp.asarray(stops),
        jnp.int32(config.resolved_pad_id),
        static,
    )


def _check_fits(model: Any, prompt_ids: Array, max_new_tokens: int) -> None:
    # Out-of-range ids and positions would be clamped silently by the table lookups.
    config = getattr(model, "config", None)
    if config is None:
        return
    total = prompt_ids.shape[1] + max_new_tokens
    if config.positional == "learned" and total > config.max_position:
        raise ValueError(
            f"prompt length {prompt_ids.shape[1]} + max_new_tokens {max_new_tokens} = {total} "
            f"exceeds the model's {config.max_position} learned positions; generate fewer tokens."
        )
    if not isinstance(prompt_ids, jax.core.Tracer):
        ids = np.asarray(prompt_ids)
        if ids.size and (ids.min() < 0 or ids.max() >= config.vocab_size):
            raise ValueError(
                f"prompt_ids must lie in [0, {config.vocab_size}), got ids from {ids.min()} to "
                f"{ids.max()}."
            )


def _check_mask(mask: Any, shape: tuple[int, ...]) -> Array:
    mask = jnp.asarray(mask)
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(
            f"prompt_mask must have the shape of prompt_ids {tuple(shape)}, got {tuple(mask.shape)}."
        )
    mask = mask.astype(bool)
    if not isinstance(mask, jax.core.Tracer):
        m = np.asarray(mask)
        # Left padding: once a row's tokens start they continue to the end.
        if not (m[:, -1].all() and (m[:, 1:] >= m[:, :-1]).all()):
            raise ValueError(
                "prompt_mask must be left padding: False then True in each row, ending in a "
                "real token; use zoo_models.left_pad."
            )
    return mask


def left_pad(
    prompts: Sequence[Sequence[int]], *, pad_id: int = 0
) -> tuple[Int[Array, "B T0"], Bool[Array, "B T0"]]:
    """Stack token lists of different lengths, padded on the left.

    Returns ``(prompt_ids [B, T0], prompt_mask [B, T0])`` for :func:`generate`, with
    ``T0`` the longest prompt and ``prompt_mask`` ``False`` at padding.
    """
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("left_pad needs at least one prompt and no empty prompt.")
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad_id, np.int32)
    mask = np.zeros((len(prompts), width), bool)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = np.asarray(p, np.int32)
        mask[row, width - len(p) :] = True
    return jnp.asarray(ids), jnp.asarray(mask)


@dataclasses.dataclass(frozen=True)
class _Static:
    max_new_tokens: int
    greedy: bool
    top_k: int | None
    use_top_p: bool
    stop_slots: int


def _stop_slots(n: int) -> int:
    # Round the number of stop ids up (0, 4, 8, 16, ...) so most calls share one compilation.
    return 0 if n == 0 else max(4, 1 << (n - 1).bit_length())


@eqx.filter_jit
def _generate(
    model: Any,
    prompt_ids: Int[Array, "B T0"],
    prompt_mask: Bool[Array, "B T0"],
    key: PRNGKeyArray,
    temperature: Float[Array, ""],
    top_p: Float[Array, ""],
    stops: Int[Array, " S"],
    pad: Int[Array, ""],
    static: _Static,
) -> Int[Array, "B T"]:
    batch, prompt_len = prompt_ids.shape
    steps = static.max_new_tokens

    def pick(logits: Array, step: Array) -> Array:
        return sample_logits(
            logits,
            jax.random.fold_in(key, step),
            temperature=temperature,
            top_k=static.top_k,
            top_p=top_p if static.use_top_p else None,
            greedy=static.greedy,
        )

    cache = model.init_cache(batch, prompt_len + steps)
    logits, cache = model.decode(prompt_ids, cache, attention_mask=prompt_mask)
    token = pick(logits[:, -1], jnp.int32(0))
    out = jnp.full((batch, prompt_len + steps), pad, jnp.int32).at[:, :prompt_len].set(prompt_ids)
    done = jnp.zeros((batch,), bool)

    def cond(state: tuple) -> Array:
        step, _, _, _, done = state
        return (step < steps) & ~jnp.all(done)

    def body(state: tuple) -> tuple:
        step, token, cache, out, done = state
        out = jax.lax.dynamic_update_slice(
            out, jnp.where(done, pad, token)[:, None], (jnp.int32(0), prompt_len + step)
        )
        if static.stop_slots:
            done = done | jnp.any(token[:, None] == stops[None, :], axis=-1)
        # The last step's forward pass is spare; it keeps the loop body a single shape.
        logits, cache = model.decode(token[:, None], cache)
        token = pick(logits[:, -1], step + 1)
        return step + 1, token, cache, out, done

    state = (jnp.int32(0), token, cache, out, done)
    _, _, _, out, _ = jax.lax.while_loop(cond, body, state)
    return out
