"""``Transformer``: the decoder-only language model every family is a configuration of."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from zoo_layers import (
    EMBED,
    MLP,
    POSITION,
    VOCAB,
    Attention,
    Dropout,
    Embedding,
    GatedDeltaNet,
    KVCache,
    LatentAttention,
    LayerNorm,
    LayerStack,
    Linear,
    MoE,
    OutputHead,
    RMSNorm,
    RopeScaling,
    RouterStats,
    TransformerBlock,
    default_compute_dtype,
    dense,
    layer_slot,
)
from zoo_layers.moe import balanced_correction_bias

from ._config import ModelConfig

Norm = LayerNorm | RMSNorm

#: The epsilon of multi-head latent attention's latent RMSNorms: DeepSeek's modules take
#: their default, not the config's ``rms_norm_eps``.
LATENT_NORM_EPS = 1e-6


def _norm(config: ModelConfig) -> Norm:
    if config.norm == "layernorm":
        return LayerNorm(
            config.d_model, eps=config.norm_eps, use_bias=config.norm_bias, dtype=config.param_dtype
        )
    return RMSNorm(
        config.d_model,
        eps=config.norm_eps,
        unit_offset=config.norm_unit_offset,
        dtype=config.param_dtype,
    )


def _block(config: ModelConfig, phase: int, key: PRNGKeyArray) -> TransformerBlock:
    """Layer ``phase`` of the repeating pattern (layers ``l`` with ``l % period == phase``)."""
    k_attn, k_mlp = jax.random.split(key)
    # Residual-branch outputs get a depth-scaled init (GPT-2's scheme).
    out_std = config.init_std / math.sqrt(2 * config.n_layers)
    rope_theta, rope_scaling = config.layer_rope(phase)
    attn: Attention | LatentAttention | GatedDeltaNet
    if config.layer_linear(phase):
        attn = GatedDeltaNet(
            config.d_model,
            config.linear_qk_heads,
            config.linear_heads,
            config.linear_key_dim,
            config.linear_value_dim,
            conv_width=config.linear_conv_width,
            norm_eps=config.norm_eps,
            init_std=config.init_std,
            out_init_std=out_std,
            dtype=config.param_dtype,
            implementation=config.linear_attention_implementation,
            key=k_attn,
        )
    elif config.kv_lora_rank is not None:
        assert config.rope_head_dim is not None and config.v_head_dim is not None
        attn = LatentAttention(
            config.d_model,
            config.n_heads,
            nope_dim=config.dim_per_head - config.rope_head_dim,
            rope_dim=config.rope_head_dim,
            v_dim=config.v_head_dim,
            kv_lora_rank=config.kv_lora_rank,
            q_lora_rank=config.q_lora_rank,
            bias=config.qkv_bias,
            norm_eps=LATENT_NORM_EPS,
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            rope_interleaved=config.rope_interleave,
            scale=config.attention_scale,
            window=config.layer_window(phase),
            soft_cap=config.attn_logit_soft_cap,
            implementation=config.attention_implementation,
            init_std=config.init_std,
            out_init_std=out_std,
            dtype=config.param_dtype,
            key=k_attn,
        )
    else:
        attn = _attention(config, phase, rope_theta, rope_scaling, out_std, k_attn)
    mlp: MLP | MoE
    if config.layer_moe(phase):
        mlp = MoE(
            config.d_model,
            config.expert_width,
            config.n_experts,
            config.experts_per_token,
            normalize=config.normalize_expert_weights,
            activation=config.activation,
            init_std=config.init_std,
            out_init_std=out_std,
            dtype=config.param_dtype,
            router_bias=config.router_bias,
            expert_bias=config.expert_bias,
            scoring=config.router_scoring,  # type: ignore[arg-type]
            correction_bias=config.router_scoring == "sigmoid",
            groups=config.expert_groups,
            group_top_k=config.expert_group_top_k,
            routed_scale=config.routed_scaling_factor,
            shared_hidden=config.shared_expert_hidden
            or (config.shared_experts * config.expert_width or None),
            shared_gate=config.shared_expert_gate,
            swiglu_limit=config.swiglu_limit,
            swiglu_alpha=config.swiglu_alpha,
            key=k_mlp,
        )
    else:
        mlp = MLP(
            config.d_model,
            config.mlp_hidden,
            activation=config.activation,
            gated=config.mlp_gated,
            use_bias=config.mlp_bias,
            init_std=config.init_std,
            out_init_std=out_std,
            dtype=config.param_dtype,
            key=k_mlp,
        )
    return TransformerBlock(
        attn_norm=_norm(config) if config.pre_norms else None,
        attn=attn,
        mlp_norm=_norm(config) if config.pre_norms else None,
        mlp=mlp,
        post_attn_norm=_norm(config) if config.post_norms else None,
        post_mlp_norm=_norm(config) if config.post_norms else None,
        dropout=Dropout(config.dropout),
        mlp_chunk=config.mlp_chunk_tokens,
    )


def _attention(
    config: ModelConfig,
    phase: int,
    rope_theta: float,
    rope_scaling: RopeScaling,
    out_std: float,
    key: PRNGKeyArray,
) -> Attention:
    return Attention(
        config.d_model,
        config.n_heads,
        num_kv_heads=config.kv_heads,
        head_dim=config.dim_per_head,
        qkv_bias=config.qkv_bias,
        out_bias=config.out_bias,
        qk_norm="projection" if config.qk_norm == "projection" else bool(config.qk_norm),
        qk_norm_eps=config.norm_eps,
        qk_norm_unit_offset=config.norm_unit_offset,
        rope_theta=rope_theta if config.positional == "rope" else None,
        rope_scaling=rope_scaling,
        scale=config.attention_scale,
        window=config.layer_window(phase),
        soft_cap=config.attn_logit_soft_cap,
        implementation=config.attention_implementation,
        init_std=config.init_std,
        out_init_std=out_std,
        dtype=config.param_dtype,
        sinks=config.attention_sinks,
        output_gate=config.attention_output_gate,
        rotary_dim=config.rotary_dim if config.positional == "rope" else None,
        key=key,
    )


def document_positions(segment_ids: Int[Array, "B T"]) -> Int[Array, "B T"]:
    """Positions that restart at 0 wherever the segment id changes (packed documents)."""
    t = segment_ids.shape[1]
    index = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), segment_ids.shape)
    starts = jnp.concatenate(
        [jnp.ones_like(segment_ids[:, :1], bool), segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1
    )
    first = jax.lax.cummax(jnp.where(starts, index, 0), axis=1)
    return index - first


class Transformer(eqx.Module):
    """A decoder-only language model.

    Attributes:
        config: the :class:`ModelConfig` it was built from (static).
        embed: token embedding ``[V, D]``.
        pos_embed: learned position table ``[max_position, D]`` (GPT-2), else ``None``.
        stack: the layers, with stacked parameters (:class:`zoo_layers.LayerStack`).
        final_norm: norm before the output head.
        lm_head: output projection ``[V, D]``, or ``None`` when tied to ``embed``.
    """

    embed: Embedding
    pos_embed: Embedding | None
    stack: LayerStack
    final_norm: Norm
    lm_head: Linear | None
    embed_dropout: Dropout
    config: ModelConfig = eqx.field(static=True)

    @property
    def compute_dtype(self) -> jnp.dtype:
        """The activation dtype (resolved for the current backend when the config says ``None``)."""
        return jnp.dtype(self.config.compute_dtype or default_compute_dtype())

    def embed_tokens(
        self,
        input_ids: Int[Array, "B T"],
        positions: Int[Array, "B T"],
        *,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "B T D"]:
        """Token (and learned position) embeddings in the compute dtype."""
        dtype = self.compute_dtype
        with jax.named_scope("embed"):
            h = self.embed(input_ids, dtype=dtype)
            if self.config.embedding_scale:
                # Gemma rounds sqrt(d_model) to the activation dtype before multiplying.
                h = h * jnp.asarray(math.sqrt(self.config.d_model), dtype)
            if self.pos_embed is not None:
                h = h + self.pos_embed(positions, dtype=dtype)
            return self.embed_dropout(h, key=key)

    def project(self, hidden: Float[Array, "B T D"]) -> Float[Array, "B T V"]:
        """Final norm, output head and final soft cap: hidden states to float32 logits."""
        h = self.final_norm(hidden)
        if self.lm_head is None:
            logits = self.embed.attend(h)
        else:
            head = self.lm_head
            bias = None if head.bias is None else head.bias.astype(jnp.float32)
            logits = dense(h, head.weight.astype(h.dtype), bias, out_dtype=jnp.float32)
        cap = self.config.final_logit_soft_cap
        return logits if cap is None else cap * jnp.tanh(logits / cap)

    def output_head(self) -> OutputHead:
        """The output projection as the loss sees it: the head's weight (the embedding table
        when tied), ``[V, D]``, and the final soft cap."""
        weight = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return OutputHead(weight, soft_cap=self.config.final_logit_soft_cap)

    def hidden(
        self,
        input_ids: Int[Array, "B T"],
        *,
        positions: Int[Array, "B T"] | None = None,
        segment_ids: Int[Array, "B T"] | None = None,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "B T D"]:
        """Hidden states after the last layer (before the final norm), in the compute dtype."""
        return self._hidden(input_ids, positions, segment_ids, key, keep_logits=False)[0]

    def _hidden(
        self,
        input_ids: Array,
        positions: Array | None,
        segment_ids: Array | None,
        key: PRNGKeyArray | None,
        *,
        keep_logits: bool,
    ) -> tuple[Array, RouterStats | None]:
        input_ids = _check_ids(input_ids, self.config.vocab_size)
        if positions is None:
            positions = (
                document_positions(segment_ids)
                if segment_ids is not None
                else jnp.broadcast_to(
                    jnp.arange(input_ids.shape[1], dtype=jnp.int32), input_ids.shape
                )
            )
        _check_same_shape("positions", positions, input_ids)
        if segment_ids is not None:
            _check_same_shape("segment_ids", segment_ids, input_ids)
        k_embed, k_stack = (None, None) if key is None else jax.random.split(key)
        h = self.embed_tokens(input_ids, positions, key=k_embed)
        # Segment id 0 marks padding (zoo_train's packing): not counted by the routers.
        mask = None if segment_ids is None else segment_ids != 0
        return self.stack.apply(
            h, positions, segment_ids, key=k_stack, mask=mask, keep_logits=keep_logits
        )

    def logits_and_router(
        self,
        input_ids: Int[Array, "B T"],
        *,
        positions: Int[Array, "B T"] | None = None,
        segment_ids: Int[Array, "B T"] | None = None,
        key: PRNGKeyArray | None = None,
        keep_logits: bool = False,
    ) -> tuple[Float[Array, "B T V"], RouterStats | None]:
        """The logits (as :meth:`__call__`) and the router statistics of the mixture-of-experts
        layers, stacked in layer order (``None`` for a dense model): the load-balancing loss as
        ``transformers`` computes it is ``stats.aux_loss()``; with ``keep_logits`` the router
        logits are ``stats.logits`` ``[L_moe, B, T, E]``. Tokens of segment id 0 (padding) are
        not counted."""
        h, stats = self._hidden(input_ids, positions, segment_ids, key, keep_logits=keep_logits)
        return self.project(h), stats

    def hidden_and_head(
        self,
        input_ids: Int[Array, "B T"],
        *,
        positions: Int[Array, "B T"] | None = None,
        segment_ids: Int[Array, "B T"] | None = None,
        key: PRNGKeyArray | None = None,
    ) -> tuple[Float[Array, "B T D"], OutputHead, RouterStats | None]:
        """What the logits are made of, for a loss that never holds them: the final hidden
        states (after the final norm, in the compute dtype), the :class:`OutputHead`
        (``head.cross_entropy(hidden, targets)`` gives each token's cross entropy and log Z
        through the fused linear cross-entropy contract; ``head.logits(hidden)`` equals
        :meth:`__call__`'s logits), and the router statistics as :meth:`logits_and_router`
        gives them (``None`` for a dense model)."""
        h, stats = self._hidden(input_ids, positions, segment_ids, key, keep_logits=False)
        return self.final_norm(h), self.output_head(), stats

    def __call__(
        self,
        input_ids: Int[Array, "B T"],
        *,
        positions: Int[Array, "B T"] | None = None,
        segment_ids: Int[Array, "B T"] | None = None,
        key: PRNGKeyArray | None = None,
    ) -> Float[Array, "B T V"]:
        """Causal language-model logits (float32).

        Args:
            input_ids: token ids ``[B, T]``.
            positions: ``[B, T]`` positions for rotary / learned position embeddings; default
                ``arange(T)``, or restarting at each document when ``segment_ids`` is given.
            segment_ids: ``[B, T]`` document ids of packed sequences; tokens attend only
                within their document.
            key: turns dropout on (``None``: inference, no dropout).
        """
        return self.project(
            self.hidden(input_ids, positions=positions, segment_ids=segment_ids, key=key)
        )

    def balance_routers(self, counts: Float[Array, "L E"]) -> Transformer:
        """This model (or the part of it an ``eqx.partition`` left, as long as it holds the
        routers' correction biases) after one step of auxiliary-loss-free balancing: each
        mixture-of-experts layer's correction bias moves ``config.router_bias_update_speed``
        towards an even load (:func:`zoo_layers.moe.balanced_correction_bias`), from
        ``counts``, the step's assignments per expert of each such layer in layer order
        (``RouterStats.counts``). The model itself when the speed is 0."""
        c = self.config
        if not c.router_bias_update_speed or c.router_scoring != "sigmoid":
            return self
        model = self
        for j, layer in enumerate(c.moe_layers):
            slot, index = layer_slot(layer, c.n_layers, c.period)
            kind, phase = slot.split(".")

            def where(m: Transformer, kind: str = kind, phase: int = int(phase)) -> Array:
                return getattr(m.stack, kind)[phase].mlp.correction_bias

            bias = where(model)
            moved = balanced_correction_bias(bias[index], counts[j], c.router_bias_update_speed)
            model = eqx.tree_at(where, model, bias.at[index].set(moved))
        return model

    def init_cache(self, batch: int, max_len: int, dtype: jnp.dtype | str | None = None) -> KVCache:
        """An empty :class:`zoo_layers.KVCache` for ``batch`` rows of up to ``max_len`` tokens:
        keys and values of the attention layers (for multi-head latent attention: each token's
        latent and rotary key part, not its expanded keys and values), and zero states of the
        gated DeltaNet layers (their convolution's last inputs and their recurrent state)
        instead of keys and values."""
        c = self.config
        dtype = dtype or self.compute_dtype
        if c.kv_lora_rank is not None:
            return KVCache.empty(
                c.n_layers, batch, max_len, 1, c.kv_lora_rank, dtype, value_dim=c.rope_head_dim
            )
        channels = 2 * c.linear_qk_heads * c.linear_key_dim + c.linear_heads * c.linear_value_dim
        return KVCache.empty(
            c.n_attention_layers,
            batch,
            max_len,
            c.kv_heads,
            c.dim_per_head,
            dtype,
            value_dim=c.value_dim,
            linear_layers=c.n_linear_layers,
            conv_shape=(c.linear_conv_width - 1, channels),
            state_shape=(c.linear_heads, c.linear_key_dim, c.linear_value_dim),
        )

    def decode(
        self,
        input_ids: Int[Array, "B t"],
        cache: KVCache,
        *,
        positions: Int[Array, "B t"] | None = None,
        attention_mask: Bool[Array, "B t"] | None = None,
    ) -> tuple[Float[Array, "B t V"], KVCache]:
        """Run ``t`` new tokens against the cache: prefill (``t`` = prompt length) or a step.

        The tokens are written at slots ``[cache.index, cache.index + t)``; the caller keeps
        ``cache.index + t <= cache.max_len``.

        Args:
            input_ids: ``[B, t]``.
            cache: from :meth:`init_cache` or a previous call.
            positions: ``[B, t]``; default continues each row from its last real token
                (counting only real tokens when ``attention_mask`` is given).
            attention_mask: ``[B, t]``, ``False`` for padding (e.g. left-padded prompts);
                padding is never attended to.

        Returns:
            float32 logits ``[B, t, V]`` and the updated cache.
        """
        input_ids = _check_ids(input_ids, self.config.vocab_size)
        b, t = input_ids.shape
        n_attention = self.config.n_attention_layers
        if b != cache.batch or cache.key.shape[0] != n_attention:
            raise ValueError(
                f"the cache holds {cache.key.shape[0]} layers x {cache.batch} rows, but the model has "
                f"{n_attention} attention layers and `input_ids` has {b} rows; use model.init_cache."
            )
        if t > cache.max_len:
            raise ValueError(f"{t} new tokens do not fit a cache of {cache.max_len} slots.")
        mask = jnp.ones((b, t), bool) if attention_mask is None else attention_mask.astype(bool)
        _check_same_shape("attention_mask", mask, input_ids)
        if positions is None:
            offsets = jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1
            positions = cache.next_positions()[:, None] + jnp.maximum(offsets, 0)
        _check_same_shape("positions", positions, input_ids)
        positions = positions.astype(jnp.int32)
        start = cache.index
        slot_positions = jax.lax.dynamic_update_slice(cache.positions, positions, (0, start))
        slot_valid = jax.lax.dynamic_update_slice(cache.valid, mask, (0, start))
        h = self.embed_tokens(input_ids, positions)
        linear = (
            None if cache.conv is None or cache.recurrent is None else (cache.conv, cache.recurrent)
        )
        h, k_new, v_new, linear = self.stack.decode_states(
            h,
            positions,
            cache.key,
            cache.value,
            slot_positions,
            slot_valid,
            start,
            linear=linear,
            mask=mask,
        )
        zero = jnp.zeros((), jnp.int32)
        at = (zero, zero, start, zero, zero)
        new_cache = KVCache(
            key=jax.lax.dynamic_update_slice(cache.key, k_new.astype(cache.key.dtype), at),
            value=jax.lax.dynamic_update_slice(cache.value, v_new.astype(cache.value.dtype), at),
            positions=slot_positions,
            valid=slot_valid,
            index=start + t,
            conv=None if linear is None else linear[0],
            recurrent=None if linear is None else linear[1],
        )
        return self.project(h), new_cache


def _check_ids(input_ids: Array, vocab_size: int) -> Array:
    if input_ids.ndim != 2 or not jnp.issubdtype(input_ids.dtype, jnp.integer):
        raise ValueError(
            f"`input_ids` must be an integer array [batch, length], got {input_ids.dtype} "
            f"with shape {tuple(input_ids.shape)}."
        )
    return input_ids


def _check_same_shape(name: str, x: Array, input_ids: Array) -> None:
    if tuple(x.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"`{name}` must have the shape of `input_ids` {tuple(input_ids.shape)}, got {tuple(x.shape)}."
        )


def build(config: ModelConfig, *, key: PRNGKeyArray) -> Transformer:
    """A freshly initialised :class:`Transformer` for ``config``."""
    if not isinstance(config, ModelConfig):
        raise ValueError(
            f"`config` must be a zoo_models.ModelConfig, got {type(config).__name__}; "
            "use zoo_models.get(name) for a preset."
        )
    return _build(config, key)


@eqx.filter_jit
def _build(c: ModelConfig, key: PRNGKeyArray) -> Transformer:
    # One compiled init program per config (the config is static), not op-by-op dispatch.
    k_embed, k_pos, k_stack, k_head = jax.random.split(key, 4)
    return Transformer(
        embed=Embedding(
            c.vocab_size, c.d_model, init_std=c.init_std, dtype=c.param_dtype, key=k_embed
        ),
        pos_embed=(
            Embedding(
                c.max_position,
                c.d_model,
                init_std=c.init_std,
                dtype=c.param_dtype,
                axes=(POSITION, EMBED),
                key=k_pos,
            )
            if c.positional == "learned"
            else None
        ),
        stack=LayerStack.init(
            lambda phase, k: _block(c, phase, k),
            c.n_layers,
            period=c.period,
            remat=c.remat,
            scan=c.scan_layers,
            key=k_stack,
        ),
        final_norm=_norm(c),
        lm_head=(
            None
            if c.tie_embeddings
            else Linear(
                c.d_model,
                c.vocab_size,
                init_std=c.init_std,
                dtype=c.param_dtype,
                axes=(VOCAB, EMBED),
                key=k_head,
            )
        ),
        embed_dropout=Dropout(c.dropout),
        config=c,
    )


def _sizes(config: ModelConfig, n_layers: int) -> tuple[int, int]:
    """``(parameters, bytes)`` of ``config`` with ``n_layers`` layers, from abstract shapes."""
    shapes = eqx.filter_eval_shape(build, config.replace(n_layers=n_layers), key=jax.random.key(0))
    leaves = [x for x in jax.tree_util.tree_leaves(shapes) if hasattr(x, "size")]
    return sum(x.size for x in leaves), sum(x.size * x.dtype.itemsize for x in leaves)


def _extrapolated(config: ModelConfig, which: int) -> int:
    # Every scan period of layers holds the same arrays: two small abstract models give the
    # whole one, however deep the configuration asks for (a hostile config.json may say 10**7).
    # Layers after the last whole period (the stack's tail) are in both.
    period, tail = config.period, config.n_layers % config.period
    one, two = _sizes(config, period + tail)[which], _sizes(config, 2 * period + tail)[which]
    return one + (two - one) * (config.n_layers // period - 1)


def num_params(config: ModelConfig) -> int:
    """Number of parameters of a model built from ``config`` (computed without allocating, in
    time independent of the depth)."""
    return _extrapolated(config, 0)


def param_bytes(config: ModelConfig) -> int:
    """Bytes of the parameters of a model built from ``config`` (as :func:`num_params`)."""
    return _extrapolated(config, 1)


#: Another name for :class:`Transformer`.
LanguageModel = Transformer
