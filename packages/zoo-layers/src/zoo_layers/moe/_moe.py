"""``MoE``: a mixture-of-experts feed-forward layer (Mixtral, Qwen3-MoE, gpt-oss, DeepSeek-V3),
dropless.

A linear router scores the experts, each token goes to its ``top_k`` best, and each expert is a
gated MLP. Options the 2025 designs added: router and expert biases and a clamped SwiGLU
(gpt-oss); sigmoid scores with a correction bias that only the selection sees, group-limited
top-k, a routed scaling factor and always-on shared experts (DeepSeek-V3). The assignments are sorted by expert and computed with grouped matmuls
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

from typing import ClassVar, cast

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
from ._routing import Scoring, route
from ._stats import RouterStats


def _check(num_experts: int, top_k: int, groups: int = 1, group_top_k: int = 1) -> None:
    if not isinstance(num_experts, int) or num_experts < 1:
        raise ValueError(f"`num_experts` must be a positive int, got {num_experts!r}.")
    if not isinstance(top_k, int) or not 1 <= top_k <= num_experts:
        raise ValueError(
            f"`top_k` must be between 1 and the number of experts ({num_experts}), got {top_k!r}."
        )
    if groups > 1 and (num_experts % groups or num_experts // groups < 2):
        raise ValueError(
            f"`groups` ({groups}) must divide the {num_experts} experts into groups of 2 or more."
        )
    if not 1 <= group_top_k <= groups:
        raise ValueError(
            f"`group_top_k` must be between 1 and `groups` ({groups}), got {group_top_k}."
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
        activation: of the gate (``silu`` for every family so far).
        implementation: the grouped matmul's name (``None``: the default order).
        gate_bias, up_bias: ``[E, I]``; down_bias: ``[E, D]``: the experts' biases (gpt-oss),
            or ``None``.
        correction_bias: ``[E]``, sigmoid scoring's selection bias (DeepSeek-V3's
            ``e_score_correction_bias``): no gradient reaches it; training updates it by the
            experts' load (aux-loss-free balancing), outside the optimizer. ``None``: none.
        shared: the shared experts, one dense gated MLP every token goes through (DeepSeek,
            Qwen3.5-MoE), or ``None``.
        shared_gate: ``[1, D]``, scales the shared experts' output by ``sigmoid(x @ gate.T)``
            (Qwen3.5-MoE's gated shared expert), or ``None``.
        scoring, groups, group_top_k, routed_scale: the router's scoring (``"softmax"`` or
            ``"sigmoid"``), group-limited selection and weight scale (see :func:`route`).
        swiglu_limit, swiglu_alpha: gpt-oss's clamped SwiGLU (``None``: ``act(gate) * up``).
    """

    router: Linear
    gate_proj: Float[Array, "E D I"]
    up_proj: Float[Array, "E D I"]
    down_proj: Float[Array, "E I D"]
    top_k: int = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)
    activation: str = eqx.field(static=True, default="silu")
    implementation: str | None = eqx.field(static=True, default=None)
    gate_bias: Float[Array, "E I"] | None = None
    up_bias: Float[Array, "E I"] | None = None
    down_bias: Float[Array, "E D"] | None = None
    correction_bias: Float[Array, " E"] | None = None
    shared: MLP | None = None
    shared_gate: Linear | None = None
    scoring: Scoring = eqx.field(static=True, default="softmax")
    groups: int = eqx.field(static=True, default=1)
    group_top_k: int = eqx.field(static=True, default=1)
    routed_scale: float = eqx.field(static=True, default=1.0)
    swiglu_limit: float | None = eqx.field(static=True, default=None)
    swiglu_alpha: float = eqx.field(static=True, default=1.702)
    #: Arrays an optimizer must leave alone (:func:`zoo_layers.trainable_mask`).
    frozen_fields: ClassVar[tuple[str, ...]] = ("correction_bias",)

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
        router_bias: bool = False,
        expert_bias: bool = False,
        scoring: Scoring = "softmax",
        correction_bias: bool = False,
        groups: int = 1,
        group_top_k: int = 1,
        routed_scale: float = 1.0,
        shared_hidden: int | None = None,
        shared_gate: bool = False,
        swiglu_limit: float | None = None,
        swiglu_alpha: float = 1.702,
        key: PRNGKeyArray,
    ) -> None:
        """``router_bias``, ``expert_bias``: biases on the router and on each expert's three
        projections; ``correction_bias``: sigmoid scoring's selection bias (zeros);
        ``shared_hidden``: the width of the shared experts' MLP (``None``: none);
        ``shared_gate``: gate it by a sigmoid of a learned ``[1, D]`` projection. The rest are
        the attributes of the same names."""
        _check(num_experts, top_k, groups, group_top_k)
        if scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"`scoring` must be 'softmax' or 'sigmoid', got {scoring!r}.")
        activation_fn(activation)
        k_router, k_gate, k_up, k_down, k_shared = jax.random.split(key, 5)
        k_shared, k_shared_gate = jax.random.split(k_shared)
        std = dim**-0.5 if init_std is None else init_std
        out_std = std if out_init_std is None else out_init_std
        self.router = Linear(
            dim,
            num_experts,
            use_bias=router_bias,
            init_std=init_std,
            axes=(None, EMBED),
            dtype=dtype,
            key=k_router,
        )
        shape = (num_experts, dim, hidden)
        self.gate_proj = std * jax.random.normal(k_gate, shape, dtype)
        self.up_proj = std * jax.random.normal(k_up, shape, dtype)
        self.down_proj = out_std * jax.random.normal(k_down, (num_experts, hidden, dim), dtype)
        self.top_k = top_k
        self.normalize = normalize
        self.activation = activation
        self.implementation = implementation
        zeros = lambda *shape: jnp.zeros(shape, dtype)
        self.gate_bias = zeros(num_experts, hidden) if expert_bias else None
        self.up_bias = zeros(num_experts, hidden) if expert_bias else None
        self.down_bias = zeros(num_experts, dim) if expert_bias else None
        self.correction_bias = jnp.zeros((num_experts,), jnp.float32) if correction_bias else None
        self.shared = (
            None
            if shared_hidden is None
            else MLP(
                dim,
                shared_hidden,
                activation=activation,
                gated=True,
                init_std=init_std,
                out_init_std=out_init_std,
                dtype=dtype,
                key=k_shared,
            )
        )
        self.shared_gate = (
            Linear(dim, 1, init_std=init_std, axes=(None, EMBED), dtype=dtype, key=k_shared_gate)
            if shared_gate and shared_hidden is not None
            else None
        )
        self.scoring = scoring
        self.groups = groups
        self.group_top_k = group_top_k
        self.routed_scale = float(routed_scale)
        self.swiglu_limit = None if swiglu_limit is None else float(swiglu_limit)
        self.swiglu_alpha = float(swiglu_alpha)

    def __check_init__(self) -> None:
        _check(self.num_experts, self.top_k, self.groups, self.group_top_k)

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
        named = with_names(
            self,
            gate_proj=up,
            up_proj=up,
            down_proj=(EXPERTS, MLP_AXIS, EMBED),
            gate_bias=(EXPERTS, MLP_AXIS),
            up_bias=(EXPERTS, MLP_AXIS),
            down_bias=(EXPERTS, EMBED),
            correction_bias=(EXPERTS,),
        )
        named = eqx.tree_at(lambda m: m.router, named, self.router.logical_axes())
        if self.shared is not None:
            named = eqx.tree_at(lambda m: m.shared, named, logical_axes(self.shared))
        if self.shared_gate is not None:
            gate = self.shared_gate.logical_axes()
            named = eqx.tree_at(lambda m: m.shared_gate, named, gate)
        return named

    def __call__(
        self,
        x: Float[Array, "*B D"],
        mask: Array | None = None,
        *,
        keep_logits: bool = False,
    ) -> tuple[Float[Array, "*B D"], RouterStats]:
        """The layer's output and its router's sums over the tokens ``mask`` keeps (default:
        all); ``keep_logits`` also returns the router logits ``[*B, E]``."""
        y, stats = self._routed(x, mask, keep_logits=keep_logits)
        if self.shared is not None:
            shared = self.shared(x)
            if self.shared_gate is not None:
                shared = shared * jax.nn.sigmoid(self.shared_gate(x))
            y = y + shared
        return y, stats

    def _routed(
        self, x: Array, mask: Array | None, *, keep_logits: bool
    ) -> tuple[Array, RouterStats]:
        if x.ndim < 2:
            raise ValueError(f"MoE needs tokens [*B, D] with a batch axis, got {tuple(x.shape)}.")
        mask = jnp.ones(x.shape[:-1], jnp.float32) if mask is None else mask.astype(jnp.float32)
        # The biases travel as one tuple (``None`` entries hold no array): the router's, the
        # selection's correction, the gate's, the up projection's and the down projection's.
        biases = (
            self.router.bias,
            self.correction_bias,
            *(None if b is None else b.astype(x.dtype) for b in self._expert_biases()),
        )
        weights: tuple[Array, Array, Array, Array] = (
            self.router.weight,
            self.gate_proj.astype(x.dtype),
            self.up_proj.astype(x.dtype),
            self.down_proj.astype(x.dtype),
        )
        layout = expert_layout(
            x.shape[0],
            x.ndim,
            self.num_experts,
            self.hidden,
            x.shape[-1],
            x.shape[1] if x.ndim >= 3 else 1,
        )
        if layout is None:
            return self._local(x, mask, *weights, biases, keep_logits=keep_logits, layout=None)
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
                tuple(
                    None if bias is None else spec
                    for bias, spec in zip(
                        biases,
                        # The down projection's bias is replicated: it is added once per
                        # assignment, after the sums over the hidden width.
                        (P(), P(), layout.bias_spec(), layout.bias_spec(), P()),
                        strict=True,
                    )
                ),
            ),
            out_specs=(x_spec, stats_spec),
            axis_names=set(layout.mesh.axis_names),
        )
        return run(x, mask, *weights, biases)

    def _expert_biases(self) -> tuple[Array | None, Array | None, Array | None]:
        return self.gate_bias, self.up_bias, self.down_bias

    def _local(
        self,
        x: Array,
        mask: Array,
        router: Array,
        gate: Array,
        up: Array,
        down: Array,
        biases: tuple[Array | None, ...],
        *,
        keep_logits: bool,
        layout: ExpertLayout | None,
    ) -> tuple[Array, RouterStats]:
        """The layer on one device's tokens and experts (``layout``: the mesh axes, ``None`` off
        a mesh)."""
        router_bias, correction, gate_bias, up_bias, down_bias = biases
        lead, dim = x.shape[:-1], x.shape[-1]
        flat = x.reshape(-1, dim)
        logits = dense(
            flat.astype(jnp.float32),
            router.astype(jnp.float32),
            None if router_bias is None else router_bias.astype(jnp.float32),
        )
        weights, experts = route(
            logits,
            self.top_k,
            normalize=self.normalize,
            scoring=self.scoring,
            correction_bias=correction,
            groups=self.groups,
            group_top_k=self.group_top_k,
            scale=self.routed_scale,
        )
        own_experts, own_weights = experts, weights
        stats = RouterStats.of(logits, experts, mask.reshape(-1))
        first: Array | int = 0
        if layout is not None:
            sums = (stats.counts, stats.probs, stats.z, stats.tokens)
            if layout.token_axes:
                sums = jax.lax.psum(sums, layout.token_axes)
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
            gate_bias=gate_bias,
            up_bias=up_bias,
            swiglu_limit=self.swiglu_limit,
            swiglu_alpha=self.swiglu_alpha,
        )
        if layout is not None:
            summed = layout.hidden + tuple(a for a in layout.experts if a not in layout.exchange)
            if summed:
                y = jax.lax.psum(y, summed)
            if layout.exchange:
                y = jax.lax.psum_scatter(y, layout.exchange, scatter_dimension=0, tiled=True)
        if down_bias is not None:
            # Once per assignment of this device's own tokens: sum_k w_k * b_{e_k}.
            term = jnp.take(down_bias, own_experts, axis=0).astype(jnp.float32)
            y = (y.astype(jnp.float32) + jnp.sum(own_weights[..., None] * term, axis=1)).astype(
                y.dtype
            )
        if keep_logits:
            sums = (stats.counts, stats.probs, stats.z, stats.tokens)
            stats = RouterStats(*sums, logits=logits.reshape(*lead, -1))
        return y.reshape(*lead, dim), stats
