"""``MoE``: a mixture-of-experts feed-forward layer (Mixtral, Qwen3-MoE), dropless.

A linear router scores the experts, each token goes to its ``top_k`` best, and each expert is a
gated MLP. The assignments are sorted by expert and computed with grouped matmuls
(:func:`zoo_layers.grouped_matmul`): no capacity factor, no token dropped, no work for the
experts a token does not use.

On a mesh (active axis rules and a mesh of several devices) the layer runs under ``shard_map``:
each device routes its own tokens; the experts are split over the mesh axes the rules give
``"experts"``, and their hidden width over the axes of ``"mlp"``; their model width, stored
split over the axes of ``"embed"`` (fully sharded data parallelism), is gathered inside the
layer, so the gradients leave it split as the weights are stored. The tokens of the devices
along an expert axis are gathered before the experts run, and each device's results are
summed and scattered back to the devices that own the tokens (the token exchange), so every
device computes only its own experts' share.
"""

from __future__ import annotations

from typing import cast

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float, PRNGKeyArray

from .._linear import Linear, dense
from .._logical import EMBED, EXPERTS, MLP_AXIS, logical_axes, with_names
from .._mlp import MLP, activation_fn
from ._experts import expert_mlp
from ._parallel import ExpertLayout, expert_layout
from ._routing import route
from ._stats import RouterStats


def _check(num_experts: int, top_k: int) -> None:
    if not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"`num_experts` must be a positive int, got {num_experts!r}.")
    if not isinstance(top_k, int) or not 1 <= top_k <= num_experts:
        raise ValueError(
            f"`top_k` must be between 1 and the number of experts ({num_experts}), got {top_k!r}."
        )


class MoE(eqx.Module):
    """Mixture-of-experts MLP over the last axis: ``[*B, D] -> ([*B, D], RouterStats)``.

    Attributes:
        router: the gate, ``[E, D]``; its logits are computed in float32.
        gate_proj, up_proj: ``[E, D, I]``; down_proj: ``[E, I, D]`` (each expert's matrices
            transposed from the ``nn.Linear`` layout, as grouped matmuls take them).
        top_k: experts per token.
        normalize: divide the top-k weights by their sum (Mixtral; Qwen3-MoE's
            ``norm_topk_prob``), else weight by the probabilities themselves.
        activation: of the gate (``silu`` for both families).
        implementation: the grouped matmul's name (``None``: the default order).
        shared_expert: a gated MLP every token goes through besides its routed experts, or
            ``None`` (Qwen3.5-MoE, Qwen2-MoE); shared_expert_gate: ``[1, D]``, scales the shared
            expert's output by ``sigmoid(x @ gate.T)`` when present.
    """

    router: Linear
    gate_proj: Float[Array, "E D I"]
    up_proj: Float[Array, "E D I"]
    down_proj: Float[Array, "E I D"]
    top_k: int = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)
    activation: str = eqx.field(static=True, default="silu")
    implementation: str | None = eqx.field(static=True, default=None)
    shared_expert: MLP | None = None
    shared_expert_gate: Linear | None = None

    def __init__(
        self,
        dim: int,
        hidden: int,
        num_experts: int,
        top_k: int,
        *,
        normalize: bool = True,
        activation: str = "silu",
        init_std: float | None = None,
        out_init_std: float | None = None,
        dtype: str = "float32",
        implementation: str | None = None,
        shared_hidden: int | None = None,
        shared_gate: bool = False,
        key: PRNGKeyArray,
    ) -> None:
        """``shared_hidden``: the width of a shared expert (``None``: none);
        ``shared_gate``: gate it by a sigmoid of a learned ``[1, D]`` projection."""
        _check(num_experts, top_k)
        activation_fn(activation)
        k_router, k_gate, k_up, k_down, k_shared, k_shared_gate = jax.random.split(key, 6)
        std = dim**-0.5 if init_std is None else init_std
        out_std = std if out_init_std is None else out_init_std
        self.router = Linear(
            dim, num_experts, init_std=init_std, axes=(None, EMBED), dtype=dtype, key=k_router
        )
        shape = (num_experts, dim, hidden)
        self.gate_proj = std * jax.random.normal(k_gate, shape, dtype)
        self.up_proj = std * jax.random.normal(k_up, shape, dtype)
        self.down_proj = out_std * jax.random.normal(k_down, (num_experts, hidden, dim), dtype)
        self.top_k = top_k
        self.normalize = normalize
        self.activation = activation
        self.implementation = implementation
        self.shared_expert = None
        self.shared_expert_gate = None
        if shared_hidden is not None:
            self.shared_expert = MLP(
                dim,
                shared_hidden,
                activation=activation,
                gated=True,
                init_std=init_std,
                out_init_std=out_init_std,
                dtype=dtype,
                key=k_shared,
            )
            if shared_gate:
                self.shared_expert_gate = Linear(
                    dim, 1, init_std=init_std, axes=(None, EMBED), dtype=dtype, key=k_shared_gate
                )

    def __check_init__(self) -> None:
        _check(self.num_experts, self.top_k)

    @property
    def num_experts(self) -> int:
        """``E``."""
        return self.gate_proj.shape[-3]

    @property
    def hidden(self) -> int:
        """Each expert's hidden width ``I``."""
        return self.gate_proj.shape[-1]

    def logical_axes(self) -> MoE:
        """This layer with every array replaced by its logical names."""
        up = (EXPERTS, EMBED, MLP_AXIS)
        named = with_names(self, gate_proj=up, up_proj=up, down_proj=(EXPERTS, MLP_AXIS, EMBED))
        named = eqx.tree_at(lambda m: m.router, named, self.router.logical_axes())
        if self.shared_expert is not None:
            shared = logical_axes(self.shared_expert)
            named = eqx.tree_at(lambda m: m.shared_expert, named, shared)
        if self.shared_expert_gate is not None:
            gate = self.shared_expert_gate.logical_axes()
            named = eqx.tree_at(lambda m: m.shared_expert_gate, named, gate)
        return named

    def _shared(self, x: Array) -> Array | None:
        """The shared expert's contribution (gated), or ``None``."""
        if self.shared_expert is None:
            return None
        y = self.shared_expert(x)
        if self.shared_expert_gate is not None:
            y = y * jax.nn.sigmoid(self.shared_expert_gate(x))
        return y

    def __call__(
        self,
        x: Float[Array, "*B D"],
        mask: Array | None = None,
        *,
        keep_logits: bool = False,
    ) -> tuple[Float[Array, "*B D"], RouterStats]:
        """The layer's output and its router's sums over the tokens ``mask`` keeps (default:
        all); ``keep_logits`` also returns the router logits ``[*B, E]``."""
        if x.ndim < 2:
            raise ValueError(f"MoE needs tokens [*B, D] with a batch axis, got {tuple(x.shape)}.")
        mask = jnp.ones(x.shape[:-1], jnp.float32) if mask is None else mask.astype(jnp.float32)
        weights = (
            self.router.weight,
            *(w.astype(x.dtype) for w in (self.gate_proj, self.up_proj, self.down_proj)),
        )
        y, stats = self._routed(x, mask, weights, keep_logits)
        shared = self._shared(x)
        return (y if shared is None else y + shared), stats

    def _routed(
        self, x: Array, mask: Array, weights: tuple[Array, ...], keep_logits: bool
    ) -> tuple[Array, RouterStats]:
        """The routed experts' output and the router's statistics (on a mesh, under
        ``shard_map``)."""
        layout = expert_layout(x.shape[0], x.ndim, self.num_experts, self.hidden, x.shape[-1])
        if layout is None:
            return self._local(x, mask, *weights, keep_logits=keep_logits, layout=None)
        x_spec = layout.token_spec(x.ndim)
        # The output specs mirror the stats' pytree, so a RouterStats holds them in place of
        # its arrays (hence the casts).
        stats_spec = RouterStats(
            cast(Array, P()),
            cast(Array, P()),
            cast(Array, P()),
            cast(Array, P()),
            cast(Array, layout.token_spec(x.ndim)) if keep_logits else None,
        )
        run = jax.shard_map(
            lambda *a: self._local(*a, keep_logits=keep_logits, layout=layout),
            mesh=layout.mesh,
            in_specs=(
                x_spec,
                layout.token_spec(x.ndim - 1),
                P(),
                layout.weight_spec(hidden_first=False),
                layout.weight_spec(hidden_first=False),
                layout.weight_spec(hidden_first=True),
            ),
            out_specs=(x_spec, stats_spec),
            axis_names=set(layout.mesh.axis_names),
        )
        return run(x, mask, *weights)

    def _local(
        self,
        x: Array,
        mask: Array,
        router: Array,
        gate: Array,
        up: Array,
        down: Array,
        *,
        keep_logits: bool,
        layout: ExpertLayout | None,
    ) -> tuple[Array, RouterStats]:
        """The layer on one device's tokens and experts (``layout``: the mesh axes, ``None`` off
        a mesh)."""
        lead, dim = x.shape[:-1], x.shape[-1]
        flat = x.reshape(-1, dim)
        logits = dense(flat.astype(jnp.float32), router.astype(jnp.float32))
        weights, experts = route(logits, self.top_k, normalize=self.normalize)
        stats = RouterStats.of(logits, experts, mask.reshape(-1))
        first: Array | int = 0
        if layout is not None:
            sums = (stats.counts, stats.probs, stats.z, stats.tokens)
            if layout.tokens:
                sums = jax.lax.psum(sums, layout.tokens)
            stats = RouterStats(*sums)
            if layout.exchange:
                flat, experts, weights = jax.lax.all_gather(
                    (flat, experts, weights), layout.exchange, axis=0, tiled=True
                )
            if layout.experts:
                first = jax.lax.axis_index(layout.experts) * gate.shape[0]
            if layout.embed:  # the stored shards of the model width, gathered for the matmuls
                gate, up = (
                    jax.lax.all_gather(w, layout.embed, axis=1, tiled=True) for w in (gate, up)
                )
                down = jax.lax.all_gather(down, layout.embed, axis=2, tiled=True)
        y = expert_mlp(
            flat,
            experts,
            weights,
            gate,
            up,
            down,
            first=first,
            activation=self.activation,
            implementation=self.implementation,
        )
        if layout is not None:
            summed = layout.hidden + tuple(a for a in layout.experts if a not in layout.exchange)
            if summed:
                y = jax.lax.psum(y, summed)
            if layout.exchange:
                y = jax.lax.psum_scatter(y, layout.exchange, scatter_dimension=0, tiled=True)
        if keep_logits:
            sums = (stats.counts, stats.probs, stats.z, stats.tokens)
            stats = RouterStats(*sums, logits=logits.reshape(*lead, -1))
        return y.reshape(*lead, dim), stats
