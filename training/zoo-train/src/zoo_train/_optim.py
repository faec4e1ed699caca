"""Optimizers, learning-rate schedules and weight-decay masks (optax)."""

from __future__ import annotations

import re

import jax
import optax
from jaxtyping import PyTree

from .settings import WARMUP_FLOOR as WARMUP_FLOOR
from .settings import OptimizerConfig
from .settings import default_warmup as default_warmup

# A path component naming an embedding table: embed, embedding, embed_tokens, tok_embeddings,
# position_embedding, wte, wpe (but not "unembed", which is an output projection).
_EMBEDDING = re.compile(r"^(embed\w*|\w*_embed\w*|wte|wpe)$", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_]\w*")


def make_schedule(config: OptimizerConfig, total_steps: int) -> optax.Schedule:
    """Warm-up then cosine/linear decay to ``lr * min_lr_ratio`` at ``total_steps`` (or constant)."""
    peak, end = config.lr, config.lr * config.min_lr_ratio
    warmup = min(config.warmup(total_steps), total_steps)
    decay = max(total_steps - warmup, 1)
    if config.schedule == "constant":
        after = optax.constant_schedule(peak)
    elif config.schedule == "cosine":
        after = optax.cosine_decay_schedule(peak, decay, alpha=config.min_lr_ratio)
    else:
        after = optax.linear_schedule(peak, end, decay)
    if warmup == 0:
        return after
    return optax.join_schedules([optax.linear_schedule(0.0, peak, warmup), after], [warmup])


def default_decay_mask(params: PyTree) -> PyTree[bool]:
    """``True`` for arrays that decay: at least 2 dims, and no embedding in their path.

    Norm scales and biases (1-D) and embedding tables (a path component named ``embed*``,
    ``*_embed*``, ``wte`` or ``wpe``) are excluded, following common LM practice.
    """

    def decays(path: tuple, leaf: object) -> bool:
        if not hasattr(leaf, "ndim") or leaf.ndim < 2:
            return False
        names = _NAME.findall(jax.tree_util.keystr(path))
        return not any(_EMBEDDING.match(n) for n in names)

    return jax.tree_util.tree_map_with_path(decays, params)


def _mask(config: OptimizerConfig, params: PyTree) -> PyTree[bool] | bool:
    if config.decay_mask == "all":
        return jax.tree.map(lambda _: True, params)
    if config.decay_mask == "none":
        return jax.tree.map(lambda _: False, params)
    return default_decay_mask(params)


def make_optimizer(
    config: OptimizerConfig, total_steps: int, params: PyTree
) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """The optax transformation (clipping first) and its schedule for ``params`` (arrays only)."""
    schedule = make_schedule(config, total_steps)
    mask = _mask(config, params)
    parts: list[optax.GradientTransformation] = []
    if config.clip_norm is not None:
        parts.append(optax.clip_by_global_norm(config.clip_norm))
    if config.name == "adamw":
        parts.append(
            optax.adamw(
                schedule,
                b1=config.b1,
                b2=config.b2,
                eps=config.eps,
                weight_decay=config.weight_decay,
                mask=mask,
            )
        )
    elif config.name == "sgd":
        if config.weight_decay:
            parts.append(optax.add_decayed_weights(config.weight_decay, mask=mask))
        parts.append(optax.sgd(schedule, momentum=config.momentum or None))
    else:
        parts.append(
            optax.adafactor(
                schedule,
                weight_decay_rate=config.weight_decay or None,
                weight_decay_mask=mask,
            )
        )
    return optax.chain(*parts), schedule
