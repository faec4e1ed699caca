"""LoRA: low-rank adapters on the linear projections of a frozen model.

``apply_lora`` wraps chosen ``zoo_layers.Linear`` modules in :class:`LoRALinear`
(``y = base(x) + (alpha / r) · (x Aᵀ) Bᵀ``, ``A [r, in]``, ``B [out, r]``, ``B = 0`` at init so the
adapted model starts equal to the base). ``lora_filter`` is the ``eqx.partition`` spec that
selects only ``A`` and ``B``, so the optimizer state holds the adapters alone; ``merge_lora``
folds them back (``W + (alpha / r) · B A``) into plain ``Linear`` layers for export. Layers stacked
for ``lax.scan`` (leading layer axis) get stacked adapters, one per layer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from zoo_layers import Linear, dense, with_names

from ..parallel import is_array_like

# Short target names → the attribute names of zoo_layers' Attention, MLP and GatedDeltaNet.
TARGETS: dict[str, str] = {
    "q": "q_proj",
    "k": "k_proj",
    "v": "v_proj",
    "o": "o_proj",
    "gate": "gate",
    "up": "up",
    "down": "down",
    "qkv": "in_proj_qkv",
    "z": "in_proj_z",
    "a": "in_proj_a",
    "b": "in_proj_b",
    "out": "out_proj",
    # Multi-head latent attention's projections (zoo_layers.LatentAttention).
    "q_a": "q_a_proj",
    "q_b": "q_b_proj",
    "kv_a": "kv_a_proj",
    "kv_b": "kv_b_proj",
}


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
    """LoRA settings.

    Attributes:
        rank: ``r``, the adapter rank (>= 1).
        alpha: the update is scaled by ``alpha / rank``.
        targets: projections to adapt: ``q``, ``k``, ``v``, ``o`` (attention), ``gate``,
            ``up``, ``down`` (MLP), ``q_a``, ``q_b``, ``kv_a``, ``kv_b`` (latent attention's
            low-rank projections) and ``qkv``, ``z``, ``a``, ``b``, ``out`` (a gated DeltaNet's
            ``in_proj_qkv``, ``in_proj_z``, ``in_proj_a``, ``in_proj_b``, ``out_proj``); full
            attribute names (``q_proj``) are accepted too.
    """

    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("q", "k", "v", "o")

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(self.targets))
        if not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"LoRA rank must be a positive integer, got {self.rank!r}.")
        if not self.alpha > 0:
            raise ValueError(f"LoRA alpha must be positive, got {self.alpha!r}.")
        if not self.targets:
            raise ValueError("LoRA needs at least one target, e.g. targets=('q', 'v').")
        known = set(TARGETS) | set(TARGETS.values())
        bad = [t for t in self.targets if t not in known]
        if bad:
            raise ValueError(f"Unknown LoRA target {bad[0]!r}; choose from {', '.join(TARGETS)}.")

    @property
    def scale(self) -> float:
        """``alpha / rank``."""
        return float(self.alpha) / self.rank

    @property
    def attributes(self) -> frozenset[str]:
        """The attribute names the targets refer to."""
        return frozenset(TARGETS.get(t, t) for t in self.targets)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"rank": self.rank, "alpha": self.alpha, "targets": list(self.targets)}


class LoRALinear(eqx.Module):
    """A frozen ``Linear`` plus a trainable low-rank update.

    ``y = base(x) + scale · (x @ lora_a.T) @ lora_b.T`` with ``lora_a [r, in]``,
    ``lora_b [out, r]`` (with extra leading axes when the layer is stacked over layers).
    """

    base: Linear
    lora_a: Float[Array, "... r I"]
    lora_b: Float[Array, "... O r"]
    scale: float = eqx.field(static=True)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def __call__(self, x: Float[Array, "*B I"]) -> Float[Array, "*B O"]:
        a = self.lora_a.astype(x.dtype)
        b = self.lora_b.astype(x.dtype)
        low = dense(dense(x, a), b)
        return self.base(x) + low * jnp.asarray(self.scale, x.dtype)

    def logical_axes(self) -> LoRALinear:
        """This layer with its arrays replaced by their logical axis names: the adapters share
        the base weight's input and output names, the rank is unnamed."""
        out_axis, in_axis = self.base.axes
        named = with_names(self, lora_a=(None, in_axis), lora_b=(out_axis, None))
        return eqx.tree_at(lambda m: m.base, named, self.base.logical_axes())

    def merged(self) -> Linear:
        """The plain ``Linear`` with ``W + scale · B A`` (in ``W``'s dtype)."""
        w = self.base.weight
        delta = jnp.einsum(
            "...or,...ri->...oi", self.lora_b.astype(jnp.float32), self.lora_a.astype(jnp.float32)
        )
        new_w = (w.astype(jnp.float32) + self.scale * delta).astype(w.dtype)
        return eqx.tree_at(lambda m: m.weight, self.base, new_w)


def _is_linear(x: object) -> bool:
    return isinstance(x, Linear | LoRALinear)


def _attribute(path: tuple) -> str:
    last = path[-1] if path else None
    return getattr(last, "name", str(last))


def path_name(path: tuple) -> str:
    # ".stack.blocks[0].attn.q_proj" → "stack.blocks.0.attn.q_proj" (safetensors-friendly).
    parts = []
    for p in path:
        if hasattr(p, "name"):
            parts.append(str(p.name))
        elif hasattr(p, "idx"):
            parts.append(str(p.idx))
        elif hasattr(p, "key"):
            parts.append(str(p.key))
        else:
            parts.append(str(p))
    return ".".join(parts)


def apply_lora(model: PyTree, config: LoRAConfig, *, key: PRNGKeyArray) -> PyTree:
    """Wrap every targeted ``Linear`` of ``model`` in a :class:`LoRALinear`.

    ``A`` is initialised uniform in ``±1/sqrt(in)`` (as in the LoRA paper's reference code),
    ``B`` with zeros, so the adapted model computes exactly what ``model`` does.

    Raises:
        ValueError: no ``Linear`` in ``model`` matches the targets, or ``model`` already has
            adapters.
    """
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model, is_leaf=_is_linear)
    if any(isinstance(leaf, LoRALinear) for _, leaf in leaves):
        raise ValueError("The model already has LoRA adapters; merge them first (merge_lora).")
    wanted = config.attributes
    picked = [
        i
        for i, (p, leaf) in enumerate(leaves)
        if isinstance(leaf, Linear) and _attribute(p) in wanted
    ]
    if not picked:
        raise ValueError(
            f"No projection of the model matches the LoRA targets {list(config.targets)}."
        )
    keys = jax.random.split(key, len(picked))
    out = [leaf for _, leaf in leaves]
    for k, i in zip(keys, picked, strict=True):
        lin: Linear = out[i]
        lead, (o, n) = lin.weight.shape[:-2], lin.weight.shape[-2:]
        bound = n**-0.5
        a = jax.random.uniform(k, (*lead, config.rank, n), lin.weight.dtype, -bound, bound)
        b = jnp.zeros((*lead, o, config.rank), lin.weight.dtype)
        out[i] = LoRALinear(base=lin, lora_a=a, lora_b=b, scale=config.scale)
    return jax.tree_util.tree_unflatten(treedef, out)


def lora_filter(model: PyTree) -> PyTree[bool]:
    """The ``eqx.partition`` spec that is ``True`` exactly on the adapters ``A`` and ``B``."""

    def spec(node: object) -> object:
        if isinstance(node, LoRALinear):
            falses = jax.tree.map(lambda _: False, node)
            return eqx.tree_at(lambda m: (m.lora_a, m.lora_b), falses, (True, True))
        return False

    return jax.tree.map(spec, model, is_leaf=lambda x: isinstance(x, LoRALinear))


def merge_lora(model: PyTree) -> PyTree:
    """Fold every adapter into its base weight; the result has plain ``Linear`` layers only."""
    return jax.tree.map(
        lambda x: x.merged() if isinstance(x, LoRALinear) else x,
        model,
        is_leaf=lambda x: isinstance(x, LoRALinear),
    )


def without_adapters(model: PyTree) -> PyTree:
    """``model`` with its adapters switched off: every :class:`LoRALinear` replaced by its base
    layer, the same arrays (no copy). The reference of preference tuning with LoRA."""
    return jax.tree.map(
        lambda x: x.base if isinstance(x, LoRALinear) else x,
        model,
        is_leaf=lambda x: isinstance(x, LoRALinear),
    )


def adapter_arrays(model: PyTree) -> dict[str, np.ndarray]:
    """The adapters of ``model`` as ``{"<path>.lora_a": A, "<path>.lora_b": B}`` (host numpy)."""
    leaves = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, LoRALinear)
    )[0]
    out = {}
    for path, leaf in leaves:
        if isinstance(leaf, LoRALinear):
            name = path_name(path)
            out[f"{name}.lora_a"] = np.asarray(leaf.lora_a)
            out[f"{name}.lora_b"] = np.asarray(leaf.lora_b)
    return out


def count_params(tree: PyTree, spec: PyTree[bool] | None = None) -> int:
    """Number of array elements in ``tree`` (selected by ``spec`` when given)."""
    if spec is not None:
        tree = eqx.filter(tree, spec)
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(eqx.filter(tree, is_array_like)))
