"""``ModelConfig``: one frozen description covering every model family in the zoo."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from zoo_layers import RopeScaling, check_float_dtype, yarn_mscale

from ._family_names import family_names

_ACTIVATIONS = ("gelu", "gelu_tanh", "silu", "relu")

# Fields added after configurations were first stored in runs: `to_dict` leaves them out while
# they hold these defaults, so a configuration saved before them reads back as the same run.
_LATER_DEFAULTS: dict[str, Any] = {
    "pre_norms": True,
    "extra_eos_token_ids": (),
    "n_experts": 0,
    "experts_per_token": 2,
    "expert_hidden": None,
    "normalize_expert_weights": True,
    "moe_every": 1,
    "dense_layers": (),
    "router_aux_loss_coef": 0.001,
    "output_router_logits": False,
    "shared_expert_hidden": None,
    "shared_expert_gate": False,
    "attention_output_gate": False,
    "rotary_fraction": 1.0,
    "linear_pattern": (False,),
    "linear_qk_heads": 0,
    "linear_heads": 0,
    "linear_key_dim": 0,
    "linear_value_dim": 0,
    "linear_conv_width": 4,
    "linear_attention_implementation": None,
    "attention_sinks": False,
    "rope_beta_fast": 32.0,
    "rope_beta_slow": 1.0,
    "rope_mscale": None,
    "rope_mscale_all_dim": None,
    "rope_truncate": True,
    "rope_attention_factor": None,
    "rope_interleave": False,
    "q_lora_rank": None,
    "kv_lora_rank": None,
    "rope_head_dim": None,
    "v_head_dim": None,
    "router_bias": False,
    "expert_bias": False,
    "swiglu_limit": None,
    "swiglu_alpha": 1.702,
    "router_scoring": "softmax",
    "expert_groups": 1,
    "expert_group_top_k": 1,
    "routed_scaling_factor": 1.0,
    "shared_experts": 0,
    "router_bias_update_speed": 0.0,
}
_TUPLES = ("window_pattern", "extra_eos_token_ids", "dense_layers", "linear_pattern")
#: Tokens a dense MLP branch computes at a time under ``remat`` (``ModelConfig.mlp_chunk``):
#: at a Llama-3-8B width a chunk's hidden activations are 112 MiB a row, where the whole
#: 8192-token row's are 0.9 GiB (measured with ``zoo compile``: docs/benchmarks.md).
REMAT_MLP_CHUNK = 2048


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shapes and semantics of a decoder-only language model.

    Families are configurations of the same layers: ``family`` names the Hugging Face
    architecture the weights map to, every behaviour is set by the fields below.

    Attributes:
        family: a registered family (:mod:`zoo_models.families`): ``"gpt2"``, ``"llama"``,
            ``"mistral"``, ``"qwen2"``, ``"gemma2"``, ``"qwen3"``, ``"gemma3_text"``,
            ``"olmo2"``, ``"mixtral"``, ``"qwen3_moe"``, or one registered since.
        vocab_size, d_model, n_layers, n_heads: the usual shapes.
        n_kv_heads: key/value heads (GQA/MQA); ``None`` means ``n_heads``.
        head_dim: per-head width; ``None`` means ``d_model // n_heads``.
        mlp_hidden: MLP hidden width.
        activation: ``"gelu"``, ``"gelu_tanh"``, ``"silu"`` or ``"relu"``.
        mlp_gated: gated MLP ``down(act(gate(x)) * up(x))`` (Llama, Gemma) or plain (GPT-2).
        norm: ``"layernorm"`` or ``"rmsnorm"``; ``norm_eps`` its epsilon.
        norm_unit_offset: RMSNorm scales by ``1 + weight`` (Gemma).
        positional: ``"rope"`` or ``"learned"`` (GPT-2's absolute position table).
        max_position: rows of the learned position table; the context the model was trained on.
        rope_theta: rotary base (of every layer, or of the global layers when
            ``rope_local_theta`` is set).
        rope_local_theta: rotary base of the sliding-window layers, which then rotate without
            ``rope_scaling`` (Gemma 3: 10,000 locally, 1,000,000 with linear scaling globally);
            ``None``: every layer uses ``rope_theta`` and ``rope_scaling``.
        rope_scaling: ``"none"``, ``"linear"``, ``"llama3"`` or ``"yarn"``, with
            ``rope_factor``, ``rope_low_freq_factor``, ``rope_high_freq_factor``,
            ``rope_original_max_position``; YaRN's ``rope_beta_fast``, ``rope_beta_slow``,
            ``rope_mscale``, ``rope_mscale_all_dim``, ``rope_truncate`` and
            ``rope_attention_factor`` (as ``transformers``' ``rope_parameters``; with
            ``rope_mscale_all_dim`` the attention scale is multiplied by its mscale squared, as
            DeepSeek does).
        rope_interleave: rotate interleaved pairs (DeepSeek's ``rope_interleave``).
        tie_embeddings: the output head is the token embedding transposed.
        qkv_bias, out_bias, mlp_bias: biases on q/k/v, the attention output, the MLP.
        norm_bias: LayerNorm has a bias (ignored for RMSNorm).
        qk_norm: RMSNorm of queries and keys before rotary: ``False`` (none), ``True`` (over each
            head, Qwen3 and Gemma 3) or ``"projection"`` (over the whole q and k projections,
            OLMo 2); its epsilon is ``norm_eps``, its ``1 + weight`` follows
            ``norm_unit_offset``.
        sliding_window: window ``W`` (a query sees itself and ``W - 1`` earlier tokens), or ``None``.
        window_pattern: which layers use the window, repeating: layer ``l`` is local iff
            ``window_pattern[l % len(window_pattern)]``. ``(True,)``: every layer (Mistral);
            ``(True, False)``: even layers local, odd global (Gemma 2); five local then one global
            (Gemma 3). Its length is the scan period; when it does not divide ``n_layers``, the
            layers after the last whole period run after the scan (the stack's tail).
        attn_logit_soft_cap, final_logit_soft_cap: ``c * tanh(x / c)`` caps, or ``None``.
        query_pre_attn_scalar: logits scale is ``query_pre_attn_scalar ** -0.5`` (Gemma 2);
            ``None`` means ``head_dim ** -0.5``.
        embedding_scale: multiply token embeddings by ``sqrt(d_model)`` (Gemma).
        pre_norms: norms on the input of attention and MLP (every family but OLMo 2).
        post_norms: norms on the attention and MLP outputs before the residual (Gemma 2 and 3,
            OLMo 2).
        dropout: residual and embedding dropout rate (active only when a key is passed).
        init_std: std of the normal initialisation of weights.
        param_dtype: parameter dtype; compute_dtype: activation dtype (``None``: bfloat16 on
            accelerators, float32 on CPU).
        remat: rematerialise each layer in the backward pass (each layer's input is kept).
        mlp_chunk: tokens of the sequence a dense MLP branch computes at a time, each chunk
            rematerialised, so the MLP's hidden activations ``[B, T, mlp_hidden]`` exist one
            chunk at a time in the forward and backward pass; ``None``:
            :data:`REMAT_MLP_CHUNK` when ``remat`` is on, else whole; ``0``: always whole.
            Used for sequences longer than the chunk and a multiple of it.
        scan_layers: apply the layers with ``jax.lax.scan`` (``True``; compile time flat in
            depth) or an unrolled loop (``False``; faster steps on CPU); ``None`` scans on
            accelerators and unrolls on CPU. The parameters are stacked either way.
        attention_implementation: kernel name for ``zoo_attention``, ``None`` for its default order.
        bos_token_id, eos_token_id, pad_token_id: special tokens, when known.
        extra_eos_token_ids: further end-of-sequence ids when the checkpoint names several
            (``config.json``'s ``eos_token_id`` list after its first, e.g. an end-of-turn token).
        n_experts: experts of each mixture-of-experts layer (``0``: every MLP is dense).
        experts_per_token: the ``k`` experts each token is routed to (top-k).
        expert_hidden: each expert's hidden width (``None``: ``mlp_hidden``; Qwen3-MoE's
            ``moe_intermediate_size``, its dense layers keep ``mlp_hidden``).
        normalize_expert_weights: the top-k router probabilities are divided by their sum
            (Mixtral always; Qwen3-MoE's ``norm_topk_prob``).
        moe_every, dense_layers: which layers are mixtures of experts: layer ``l`` is one iff
            ``(l + 1) % moe_every == 0`` and ``l`` is not in ``dense_layers`` (Qwen3-MoE's
            ``decoder_sparse_step`` and ``mlp_only_layers``).
        router_aux_loss_coef, output_router_logits: as in ``transformers``: training adds the
            load-balancing loss with weight ``router_aux_loss_coef`` when
            ``output_router_logits`` is true (see :attr:`router_aux_loss`).
        shared_expert_hidden: the width of a shared expert every token of a mixture-of-experts
            layer also goes through (``None``: none); shared_expert_gate: its output is scaled
            by a learned sigmoid gate (Qwen3.5-MoE).
        attention_output_gate: the query projection also gives a per-head output gate, whose
            sigmoid multiplies the attention output (Qwen3.5's gated attention).
        rotary_fraction: the share of each head the rotary embedding turns (Qwen3.5: 0.25,
            ``partial_rotary_factor``); the rest passes unrotated.
        linear_pattern: which layers mix tokens with a gated DeltaNet instead of attention,
            repeating: layer ``l`` does iff ``linear_pattern[l % len(linear_pattern)]``
            (Qwen3.5: three of every four, ``(True, True, True, False)``).
        linear_qk_heads, linear_heads, linear_key_dim, linear_value_dim: a gated DeltaNet's
            query/key heads, value heads and their widths (``linear_num_key_heads``, ...);
            linear_conv_width: its convolution's taps.
        linear_attention_implementation: kernel name for ``zoo_attention.linear``, ``None``
            for its default order (``ZOO_LINEAR_ATTENTION`` then the platform's).
        attention_sinks: a learned sink logit per query head in every layer (gpt-oss).
        q_lora_rank, kv_lora_rank, rope_head_dim, v_head_dim: multi-head latent attention
            (DeepSeek-V2/V3) when ``kv_lora_rank`` is set: the query bottleneck (``None``: a
            full query projection), the key/value latent, the rotary part of each query/key
            head (``head_dim`` is the whole, ``nope + rope``) and the values' head dim.
        router_bias, expert_bias: biases on the router and the experts (gpt-oss).
        swiglu_limit, swiglu_alpha: the experts' clamped SwiGLU (gpt-oss); ``None``: plain.
        router_scoring: ``"softmax"`` or ``"sigmoid"`` (DeepSeek-V3: sigmoid scores, a
            correction bias for the selection); ``expert_groups``, ``expert_group_top_k``:
            group-limited top-k (``n_group``, ``topk_group``); ``routed_scaling_factor``.
        shared_experts: shared experts of each mixture-of-experts layer (DeepSeek), each
            ``expert_hidden`` wide (one MLP of their summed width).
        router_bias_update_speed: how far training moves the sigmoid router's correction
            bias per step towards an even load (DeepSeek-V3's aux-loss-free balancing,
            ``gamma``; 0: never).
    """

    family: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    mlp_hidden: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    activation: str = "silu"
    mlp_gated: bool = True
    norm: str = "rmsnorm"
    norm_eps: float = 1e-5
    norm_unit_offset: bool = False
    norm_bias: bool = True
    positional: str = "rope"
    max_position: int = 2048
    rope_theta: float = 10000.0
    rope_local_theta: float | None = None
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_position: int = 8192
    tie_embeddings: bool = False
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool | str = False
    sliding_window: int | None = None
    window_pattern: tuple[bool, ...] = (True,)
    attn_logit_soft_cap: float | None = None
    final_logit_soft_cap: float | None = None
    query_pre_attn_scalar: int | None = None
    embedding_scale: bool = False
    pre_norms: bool = True
    post_norms: bool = False
    dropout: float = 0.0
    init_std: float = 0.02
    param_dtype: str = "float32"
    compute_dtype: str | None = None
    remat: bool = False
    mlp_chunk: int | None = None
    scan_layers: bool | None = None
    attention_implementation: str | None = None
    bos_token_id: int | None = None
    eos_token_id: int | None = None
    pad_token_id: int | None = None
    extra_eos_token_ids: tuple[int, ...] = ()
    n_experts: int = 0
    experts_per_token: int = 2
    expert_hidden: int | None = None
    normalize_expert_weights: bool = True
    moe_every: int = 1
    dense_layers: tuple[int, ...] = ()
    router_aux_loss_coef: float = 0.001
    output_router_logits: bool = False
    shared_expert_hidden: int | None = None
    shared_expert_gate: bool = False
    attention_output_gate: bool = False
    rotary_fraction: float = 1.0
    linear_pattern: tuple[bool, ...] = (False,)
    linear_qk_heads: int = 0
    linear_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv_width: int = 4
    linear_attention_implementation: str | None = None
    attention_sinks: bool = False
    rope_beta_fast: float = 32.0
    rope_beta_slow: float = 1.0
    rope_mscale: float | None = None
    rope_mscale_all_dim: float | None = None
    rope_truncate: bool = True
    rope_attention_factor: float | None = None
    rope_interleave: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    rope_head_dim: int | None = None
    v_head_dim: int | None = None
    router_bias: bool = False
    expert_bias: bool = False
    swiglu_limit: float | None = None
    swiglu_alpha: float = 1.702
    router_scoring: str = "softmax"
    expert_groups: int = 1
    expert_group_top_k: int = 1
    routed_scaling_factor: float = 1.0
    shared_experts: int = 0
    router_bias_update_speed: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "window_pattern", tuple(bool(b) for b in self.window_pattern))
        object.__setattr__(self, "linear_pattern", tuple(bool(b) for b in self.linear_pattern))
        object.__setattr__(self, "extra_eos_token_ids", tuple(self.extra_eos_token_ids))
        object.__setattr__(self, "dense_layers", tuple(self.dense_layers))
        # "head" and "none" are accepted as the spellings zoo_layers uses.
        qk = self.qk_norm
        if isinstance(qk, str):
            qk = {"head": True, "none": False}.get(qk, qk)
        if not (isinstance(qk, bool) or qk == "projection"):
            raise ValueError(
                f"`qk_norm` must be False, True (per head) or 'projection', got {self.qk_norm!r}."
            )
        object.__setattr__(self, "qk_norm", qk)
        families = family_names()
        if self.family not in families:
            raise ValueError(f"`family` must be one of {', '.join(families)}, got {self.family!r}.")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "mlp_hidden", "max_position"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
        if self.kv_heads <= 0 or self.n_heads % self.kv_heads:
            raise ValueError(
                f"`n_heads` ({self.n_heads}) must be a multiple of `n_kv_heads` ({self.kv_heads})."
            )
        if self.head_dim is None and self.d_model % self.n_heads:
            raise ValueError(
                f"`d_model` ({self.d_model}) is not divisible by `n_heads` ({self.n_heads}); set `head_dim`."
            )
        if self.positional == "rope" and self.rotary_dim % 2:
            raise ValueError(f"rotary embeddings need an even head_dim, got {self.rotary_dim}.")
        if self.activation not in _ACTIVATIONS:
            raise ValueError(
                f"`activation` must be one of {', '.join(_ACTIVATIONS)}, got {self.activation!r}."
            )
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"`norm` must be 'layernorm' or 'rmsnorm', got {self.norm!r}.")
        if self.positional not in ("rope", "learned"):
            raise ValueError(f"`positional` must be 'rope' or 'learned', got {self.positional!r}.")
        if self.scan_layers not in (None, True, False):
            raise ValueError(
                f"`scan_layers` must be True, False or None, got {self.scan_layers!r}."
            )
        if not self.window_pattern:
            raise ValueError("`window_pattern` must name at least one layer kind, e.g. (True,).")
        if self.n_layers < self.period:
            raise ValueError(
                f"`n_layers` ({self.n_layers}) must be at least len(window_pattern) ({self.period})."
            )
        if not (self.pre_norms or self.post_norms):
            raise ValueError("a model needs `pre_norms` or `post_norms` (or both); set one.")
        if self.rope_local_theta is not None and not self.rope_local_theta > 0:
            raise ValueError(
                f"`rope_local_theta` must be > 0 or None, got {self.rope_local_theta!r}."
            )
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"`sliding_window` must be >= 1 or None, got {self.sliding_window!r}.")
        for name in ("attn_logit_soft_cap", "final_logit_soft_cap", "query_pre_attn_scalar"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"`{name}` must be > 0 or None, got {value!r}.")
        for name in ("norm_eps", "rope_theta", "init_std"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"`{name}` must be a positive number, got {value!r}.")
            if not math.isfinite(value):
                raise ValueError(f"`{name}` must be finite, got {value!r}.")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1), got {self.dropout!r}.")
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"`{name}` ({value}) must be a token id below `vocab_size` ({self.vocab_size})."
                )
        if self.extra_eos_token_ids and self.eos_token_id is None:
            raise ValueError("`extra_eos_token_ids` needs an `eos_token_id` first; set it.")
        for value in self.extra_eos_token_ids:
            if not isinstance(value, int) or not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"`extra_eos_token_ids` holds {value!r}; every id must be below `vocab_size` "
                    f"({self.vocab_size})."
                )
        if self.mlp_chunk is not None and (
            not isinstance(self.mlp_chunk, int)
            or isinstance(self.mlp_chunk, bool)
            or self.mlp_chunk < 0
        ):
            raise ValueError(
                f"`mlp_chunk` must be a number of tokens >= 0 or None, got {self.mlp_chunk!r}."
            )
        check_float_dtype("param_dtype", self.param_dtype)
        if self.compute_dtype is not None:
            check_float_dtype("compute_dtype", self.compute_dtype)
        _ = self.rope  # validates the scaling fields
        self._check_latent()
        self._check_experts()
        self._check_linear()

    def _check_latent(self) -> None:
        if self.kv_lora_rank is None:
            for name in ("q_lora_rank", "rope_head_dim", "v_head_dim"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"`{name}` is a multi-head latent attention setting; set `kv_lora_rank` "
                        "too, or leave it None."
                    )
            return
        for name in ("kv_lora_rank", "q_lora_rank", "rope_head_dim", "v_head_dim"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
        if self.head_dim is None or self.rope_head_dim is None or self.v_head_dim is None:
            raise ValueError(
                "multi-head latent attention needs `head_dim` (nope + rope), `rope_head_dim` "
                "and `v_head_dim`; set them."
            )
        if not self.rope_head_dim < self.head_dim:
            raise ValueError(
                f"`rope_head_dim` ({self.rope_head_dim}) must be below `head_dim` "
                f"({self.head_dim}), which also holds the part without position."
            )
        if self.positional != "rope" or self.kv_heads != self.n_heads:
            raise ValueError(
                "multi-head latent attention has rotary positions and one key/value head per "
                "query head; set positional='rope' and n_kv_heads=n_heads."
            )
        if self.qk_norm or self.attention_sinks:
            raise ValueError(
                "multi-head latent attention here has no qk-norm and no sinks; unset them."
            )

    def _check_experts(self) -> None:
        if self.router_scoring not in ("softmax", "sigmoid"):
            raise ValueError(
                f"`router_scoring` must be 'softmax' or 'sigmoid', got {self.router_scoring!r}."
            )
        if not isinstance(self.n_experts, int) or self.n_experts < 0:
            raise ValueError(f"`n_experts` must be an int >= 0, got {self.n_experts!r}.")
        if not self.n_experts:
            return
        k = self.experts_per_token
        if not isinstance(k, int) or not 1 <= k <= self.n_experts:
            raise ValueError(
                f"`experts_per_token` must be between 1 and `n_experts` ({self.n_experts}), "
                f"got {k!r}."
            )
        hidden = self.expert_hidden
        if hidden is not None and (not isinstance(hidden, int) or hidden <= 0):
            raise ValueError(f"`expert_hidden` must be a positive int or None, got {hidden!r}.")
        if not isinstance(self.moe_every, int) or self.moe_every < 1:
            raise ValueError(f"`moe_every` must be a positive int, got {self.moe_every!r}.")
        if not all(isinstance(i, int) and i >= 0 for i in self.dense_layers):
            raise ValueError(
                f"`dense_layers` must hold layer indices >= 0, got {self.dense_layers!r}."
            )
        if not self.mlp_gated or self.mlp_bias:
            raise ValueError(
                "experts are gated MLPs with biases only by `expert_bias`: set mlp_gated=True "
                "and mlp_bias=False, or n_experts=0."
            )
        if self.router_aux_loss_coef < 0:
            raise ValueError(
                f"`router_aux_loss_coef` must be >= 0, got {self.router_aux_loss_coef!r}."
            )
        groups, top = self.expert_groups, self.expert_group_top_k
        if not isinstance(groups, int) or groups < 1 or self.n_experts % groups:
            raise ValueError(
                f"`expert_groups` ({groups!r}) must divide `n_experts` ({self.n_experts})."
            )
        if groups > 1 and self.n_experts // groups < 2:
            raise ValueError(
                f"`expert_groups` ({groups}) leaves groups of one expert; groups need two or more."
            )
        if not isinstance(top, int) or not 1 <= top <= groups:
            raise ValueError(
                f"`expert_group_top_k` must be between 1 and `expert_groups` ({groups}), "
                f"got {top!r}."
            )
        if groups > 1 and self.router_scoring != "sigmoid":
            raise ValueError("group-limited routing (`expert_groups` > 1) needs sigmoid scoring.")
        if not isinstance(self.shared_experts, int) or self.shared_experts < 0:
            raise ValueError(f"`shared_experts` must be an int >= 0, got {self.shared_experts!r}.")
        if self.swiglu_limit is not None and not self.swiglu_limit > 0:
            raise ValueError(f"`swiglu_limit` must be > 0 or None, got {self.swiglu_limit!r}.")
        speed = self.router_bias_update_speed
        if not isinstance(speed, int | float) or isinstance(speed, bool) or speed < 0:
            raise ValueError(f"`router_bias_update_speed` must be >= 0, got {speed!r}.")
        if speed and self.router_scoring != "sigmoid":
            raise ValueError(
                "`router_bias_update_speed` moves the sigmoid router's correction bias; set "
                "router_scoring='sigmoid' or leave it 0."
            )

    def _check_linear(self) -> None:
        fraction = self.rotary_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ValueError(f"`rotary_fraction` must be a number in (0, 1], got {fraction!r}.")
        if not 0 < fraction <= 1:
            raise ValueError(f"`rotary_fraction` must be in (0, 1], got {fraction!r}.")
        if self.positional == "rope" and (self.rotary_dim < 2 or self.rotary_dim % 2):
            raise ValueError(
                f"`rotary_fraction` {fraction} of head_dim {self.dim_per_head} leaves "
                f"{self.rotary_dim} rotated features; the rotation needs an even number."
            )
        hidden = self.shared_expert_hidden
        if hidden is not None and (
            not isinstance(hidden, int) or hidden <= 0 or not self.n_experts
        ):
            raise ValueError(
                f"`shared_expert_hidden` must be a positive int with n_experts > 0, or None; got "
                f"{hidden!r} with {self.n_experts} experts."
            )
        if hidden is not None and self.shared_experts:
            raise ValueError(
                "`shared_expert_hidden` and `shared_experts` both size the shared experts; "
                "set one of them."
            )
        if self.shared_expert_gate and not (hidden or self.shared_experts):
            raise ValueError(
                "`shared_expert_gate` gates a shared expert; set `shared_expert_hidden` too."
            )
        if not self.linear_pattern:
            raise ValueError("`linear_pattern` must name at least one layer kind, e.g. (False,).")
        if self.kv_lora_rank is not None and (
            self.n_linear_layers or self.attention_output_gate or self.rotary_fraction != 1
        ):
            raise ValueError(
                "multi-head latent attention here has no output gate, partial rotation or "
                "gated DeltaNet layers; unset them or `kv_lora_rank`."
            )
        if not self.n_linear_layers:
            return
        if self.n_linear_layers == self.n_layers:
            raise ValueError(
                "`linear_pattern` makes every layer a gated DeltaNet; keep at least one "
                "attention layer (e.g. (True, True, True, False))."
            )
        for name in ("linear_qk_heads", "linear_heads", "linear_key_dim", "linear_value_dim",
                     "linear_conv_width"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"`{name}` must be a positive int for gated DeltaNet layers, got {value!r}."
                )
        if self.linear_heads % self.linear_qk_heads:
            raise ValueError(
                f"`linear_heads` ({self.linear_heads}) must be a multiple of `linear_qk_heads` "
                f"({self.linear_qk_heads})."
            )

    def layer_linear(self, layer: int) -> bool:
        """Whether layer ``layer`` mixes tokens with a gated DeltaNet (else attention)."""
        return self.linear_pattern[layer % len(self.linear_pattern)]

    @property
    def n_linear_layers(self) -> int:
        """How many layers are gated DeltaNets."""
        pattern, n = self.linear_pattern, self.n_layers
        return (n // len(pattern)) * sum(pattern) + sum(pattern[: n % len(pattern)])

    @property
    def n_attention_layers(self) -> int:
        """How many layers are attention (the layers a KV cache holds)."""
        return self.n_layers - self.n_linear_layers

    @property
    def mlp_chunk_tokens(self) -> int | None:
        """The chunk a dense MLP branch computes in (``mlp_chunk`` resolved; ``None``: whole)."""
        if self.mlp_chunk is not None:
            return self.mlp_chunk or None
        return REMAT_MLP_CHUNK if self.remat else None

    @property
    def kv_heads(self) -> int:
        """Key/value heads, resolved."""
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def dim_per_head(self) -> int:
        """Head width, resolved."""
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def rotary_dim(self) -> int:
        """The width each head rotates: ``rope_head_dim`` under latent attention, else
        ``int(head_dim * rotary_fraction)``, as transformers rounds it."""
        if self.kv_lora_rank is not None and self.rope_head_dim:
            return self.rope_head_dim
        return int(self.dim_per_head * self.rotary_fraction)

    @property
    def value_dim(self) -> int:
        """The values' head dim: ``v_head_dim`` under latent attention, else the heads'."""
        return self.v_head_dim if self.v_head_dim is not None else self.dim_per_head

    @property
    def cache_width(self) -> int:
        """Numbers a decoding cache keeps per token and attention layer: the keys and values of every
        key/value head, or under latent attention the latent and the shared rotary key part."""
        if self.kv_lora_rank is not None and self.rope_head_dim is not None:
            return self.kv_lora_rank + self.rope_head_dim
        return self.kv_heads * (self.dim_per_head + self.value_dim)

    @property
    def period(self) -> int:
        """Layers per scan step: the length of ``window_pattern``, or with mixture-of-experts
        layers the shortest period that both the windows and the expert layers repeat (the
        last repetition may be cut short: the stack's tail)."""
        width = len(self.window_pattern)
        if not self.n_experts and not self.n_linear_layers:
            return width
        kinds = [
            (self.window_pattern[i % width], self.layer_moe(i), self.layer_linear(i))
            for i in range(self.n_layers)
        ]
        for period in range(1, self.n_layers + 1):
            if all(kinds[i] == kinds[i % period] for i in range(self.n_layers)):
                return period
        raise AssertionError("unreachable: the whole depth always repeats")

    def layer_moe(self, layer: int) -> bool:
        """Whether layer ``layer``'s MLP is a mixture of experts."""
        return (
            self.n_experts > 0
            and (layer + 1) % self.moe_every == 0
            and layer not in self.dense_layers
        )

    @property
    def moe_layers(self) -> tuple[int, ...]:
        """The indices of the mixture-of-experts layers."""
        return tuple(i for i in range(self.n_layers) if self.layer_moe(i))

    @property
    def expert_width(self) -> int:
        """Each expert's hidden width, resolved."""
        return self.mlp_hidden if self.expert_hidden is None else self.expert_hidden

    @property
    def router_aux_loss(self) -> float:
        """The weight training gives the load-balancing loss, as ``transformers`` trains:
        ``router_aux_loss_coef`` when ``output_router_logits`` is true, else 0."""
        return self.router_aux_loss_coef if self.output_router_logits and self.n_experts else 0.0

    @property
    def rope(self) -> RopeScaling:
        """The rotary scaling as a :class:`zoo_layers.RopeScaling`."""
        return RopeScaling(
            kind=self.rope_scaling,  # type: ignore[arg-type]
            factor=self.rope_factor,
            low_freq_factor=self.rope_low_freq_factor,
            high_freq_factor=self.rope_high_freq_factor,
            original_max_position=self.rope_original_max_position,
            beta_fast=self.rope_beta_fast,
            beta_slow=self.rope_beta_slow,
            mscale=self.rope_mscale,
            mscale_all_dim=self.rope_mscale_all_dim,
            truncate=self.rope_truncate,
            yarn_attention_factor=self.rope_attention_factor,
        )

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """Every end-of-sequence id: ``eos_token_id`` then ``extra_eos_token_ids``."""
        first = () if self.eos_token_id is None else (self.eos_token_id,)
        return first + self.extra_eos_token_ids

    def layer_rope(self, layer: int) -> tuple[float, RopeScaling]:
        """The rotary base and scaling of layer ``layer``."""
        if self.rope_local_theta is not None and self.layer_window(layer) is not None:
            return self.rope_local_theta, RopeScaling()
        return self.rope_theta, self.rope

    def layer_window(self, layer: int) -> int | None:
        """The sliding window of layer ``layer`` (``None``: global attention)."""
        if self.sliding_window is None:
            return None
        pattern = self.window_pattern
        return self.sliding_window if pattern[layer % len(pattern)] else None

    @property
    def attention_scale(self) -> float:
        """The factor the attention logits are multiplied by."""
        base = (
            self.dim_per_head if self.query_pre_attn_scalar is None else self.query_pre_attn_scalar
        )
        scale = float(base) ** -0.5
        if self.rope_scaling == "yarn" and self.rope_mscale_all_dim:
            # DeepSeek's softmax scale under YaRN: times mscale(factor, mscale_all_dim)².
            scale *= yarn_mscale(self.rope_factor, self.rope_mscale_all_dim) ** 2
        return scale

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field (those added later, ``pre_norms``,
        ``extra_eos_token_ids`` and the experts', only when they are not at their defaults)."""
        out = dataclasses.asdict(self)
        for name in _TUPLES:
            out[name] = list(getattr(self, name))
        for name, default in _LATER_DEFAULTS.items():
            if getattr(self, name) == default:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(
                f"unknown ModelConfig field(s) {', '.join(unknown)}; known fields: {', '.join(sorted(names))}."
            )
        data = dict(data)
        for name in _TUPLES:
            if name in data:
                data[name] = tuple(data[name])
        return cls(**data)

    def to_json(self) -> str:
        """:meth:`to_dict` as a JSON string."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))
