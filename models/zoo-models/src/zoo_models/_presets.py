"""Named model configurations: published architectures and tiny ones for tests."""

from __future__ import annotations

from ._config import ModelConfig


def _gpt2(**kw: object) -> ModelConfig:
    base = dict(
        family="gpt2",
        vocab_size=50257,
        activation="gelu_tanh",
        mlp_gated=False,
        norm="layernorm",
        norm_eps=1e-5,
        positional="learned",
        max_position=1024,
        tie_embeddings=True,
        qkv_bias=True,
        out_bias=True,
        mlp_bias=True,
        bos_token_id=50256,
        eos_token_id=50256,
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _llama(**kw: object) -> ModelConfig:
    base = dict(family="llama", activation="silu", mlp_gated=True, norm="rmsnorm", norm_eps=1e-5)
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _gemma2(**kw: object) -> ModelConfig:
    base = dict(
        family="gemma2",
        activation="gelu_tanh",
        mlp_gated=True,
        norm="rmsnorm",
        norm_eps=1e-6,
        norm_unit_offset=True,
        rope_theta=10000.0,
        tie_embeddings=True,
        window_pattern=(True, False),
        attn_logit_soft_cap=50.0,
        final_logit_soft_cap=30.0,
        embedding_scale=True,
        post_norms=True,
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _qwen3(**kw: object) -> ModelConfig:
    base = dict(
        family="qwen3",
        vocab_size=151936,
        activation="silu",
        norm_eps=1e-6,
        head_dim=128,
        max_position=40960,
        rope_theta=1000000.0,
        qk_norm=True,
        bos_token_id=151643,
        eos_token_id=151645,  # <|im_end|>: the post-trained checkpoints end their turns with it
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _gemma3(**kw: object) -> ModelConfig:
    # Five sliding-window layers, then one global; 26 or 34 layers leave a tail of 2 or 4.
    base = dict(
        family="gemma3_text",
        activation="gelu_tanh",
        norm_eps=1e-6,
        norm_unit_offset=True,
        head_dim=256,
        rope_theta=1000000.0,
        rope_local_theta=10000.0,
        tie_embeddings=True,
        window_pattern=(True,) * 5 + (False,),
        query_pre_attn_scalar=256,
        qk_norm=True,
        embedding_scale=True,
        post_norms=True,
        bos_token_id=2,
        eos_token_id=1,
        extra_eos_token_ids=(106,),  # <end_of_turn> of the instruction-tuned checkpoints
        pad_token_id=0,
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _olmo2(**kw: object) -> ModelConfig:
    base = dict(
        family="olmo2",
        vocab_size=100352,
        activation="silu",
        norm_eps=1e-6,
        max_position=4096,
        rope_theta=500000.0,
        qk_norm="projection",
        pre_norms=False,
        post_norms=True,
        eos_token_id=100257,
        pad_token_id=100277,
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _mixtral(**kw: object) -> ModelConfig:
    base = dict(
        family="mixtral",
        activation="silu",
        norm_eps=1e-5,
        rope_theta=1000000.0,
        n_experts=8,
        experts_per_token=2,
        # Training here balances the experts by default (transformers only when asked).
        output_router_logits=True,
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


def _qwen3_moe(**kw: object) -> ModelConfig:
    base = dict(
        family="qwen3_moe",
        vocab_size=151936,
        activation="silu",
        norm_eps=1e-6,
        max_position=40960,
        rope_theta=1000000.0,
        qk_norm=True,
        normalize_expert_weights=True,
        output_router_logits=True,
        bos_token_id=151643,
        eos_token_id=151645,
    )
    return ModelConfig(**{**base, **kw})  # type: ignore[arg-type]


_TINY = dict(vocab_size=256, d_model=64, n_layers=2, n_heads=4, max_position=128)
_TINY_IDS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)

_PRESETS: dict[str, ModelConfig] = {
    "gpt2": _gpt2(d_model=768, n_layers=12, n_heads=12, mlp_hidden=3072),
    "gpt2-medium": _gpt2(d_model=1024, n_layers=24, n_heads=16, mlp_hidden=4096),
    "llama-3.2-1b": _llama(
        vocab_size=128256,
        d_model=2048,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        head_dim=64,
        mlp_hidden=8192,
        max_position=131072,
        rope_theta=500000.0,
        rope_scaling="llama3",
        rope_factor=32.0,
        rope_low_freq_factor=1.0,
        rope_high_freq_factor=4.0,
        rope_original_max_position=8192,
        tie_embeddings=True,
        bos_token_id=128000,
        eos_token_id=128001,
    ),
    "llama-2-7b": _llama(
        vocab_size=32000,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        mlp_hidden=11008,
        max_position=4096,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "mistral-7b": _llama(
        family="mistral",
        vocab_size=32000,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        mlp_hidden=14336,
        max_position=32768,
        sliding_window=4096,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "qwen2-0.5b": _llama(
        family="qwen2",
        vocab_size=151936,
        d_model=896,
        n_layers=24,
        n_heads=14,
        n_kv_heads=2,
        mlp_hidden=4864,
        norm_eps=1e-6,
        max_position=32768,
        rope_theta=1000000.0,
        tie_embeddings=True,
        qkv_bias=True,
        eos_token_id=151643,
    ),
    "gemma-2-2b": _gemma2(
        vocab_size=256000,
        d_model=2304,
        n_layers=26,
        n_heads=8,
        n_kv_heads=4,
        head_dim=256,
        mlp_hidden=9216,
        max_position=8192,
        sliding_window=4096,
        query_pre_attn_scalar=256,
        bos_token_id=2,
        eos_token_id=1,
        pad_token_id=0,
    ),
    "qwen3-0.6b": _qwen3(
        d_model=1024, n_layers=28, n_heads=16, n_kv_heads=8, mlp_hidden=3072, tie_embeddings=True
    ),
    "qwen3-1.7b": _qwen3(
        d_model=2048, n_layers=28, n_heads=16, n_kv_heads=8, mlp_hidden=6144, tie_embeddings=True
    ),
    "qwen3-8b": _qwen3(d_model=4096, n_layers=36, n_heads=32, n_kv_heads=8, mlp_hidden=12288),
    "gemma-3-1b": _gemma3(
        vocab_size=262144,
        d_model=1152,
        n_layers=26,
        n_heads=4,
        n_kv_heads=1,
        mlp_hidden=6912,
        max_position=32768,
        sliding_window=512,
    ),
    "gemma-3-4b": _gemma3(
        vocab_size=262208,
        d_model=2560,
        n_layers=34,
        n_heads=8,
        n_kv_heads=4,
        mlp_hidden=10240,
        max_position=131072,
        sliding_window=1024,
        rope_scaling="linear",
        rope_factor=8.0,
    ),
    "mixtral-8x7b": _mixtral(
        vocab_size=32000,
        d_model=4096,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        mlp_hidden=14336,
        max_position=32768,
        router_aux_loss_coef=0.02,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "qwen3-30b-a3b": _qwen3_moe(
        d_model=2048,
        n_layers=48,
        n_heads=32,
        n_kv_heads=4,
        head_dim=128,
        mlp_hidden=6144,
        expert_hidden=768,
        n_experts=128,
        experts_per_token=8,
    ),
    "olmo-2-1b": _olmo2(d_model=2048, n_layers=16, n_heads=16, mlp_hidden=8192),
    "olmo-2-7b": _olmo2(d_model=4096, n_layers=32, n_heads=32, mlp_hidden=11008),
    # Tiny shapes for tests: each still exercises its family's distinctive features.
    "gpt2-tiny": _gpt2(**{**_TINY, "mlp_hidden": 256}, bos_token_id=255, eos_token_id=255),
    "llama-tiny": _llama(
        **_TINY,
        n_kv_heads=2,
        mlp_hidden=128,
        rope_theta=500000.0,
        rope_scaling="llama3",
        rope_factor=8.0,
        rope_original_max_position=64,
    ),
    "mistral-tiny": _llama(
        **{**_TINY, "family": "mistral"}, n_kv_heads=2, mlp_hidden=128, sliding_window=8
    ),
    "qwen2-tiny": _llama(
        **{**_TINY, "family": "qwen2"},
        n_kv_heads=1,
        mlp_hidden=128,
        norm_eps=1e-6,
        rope_theta=1000000.0,
        tie_embeddings=True,
        qkv_bias=True,
    ),
    "gemma2-tiny": _gemma2(
        **_TINY,
        n_kv_heads=2,
        head_dim=32,
        mlp_hidden=128,
        sliding_window=8,
        query_pre_attn_scalar=24,
    ),
    # head_dim independent of d_model / n_heads, per-head qk-norm, a GQA group of 2.
    "qwen3-tiny": _qwen3(
        **{**_TINY, **_TINY_IDS}, n_kv_heads=2, head_dim=32, mlp_hidden=128, tie_embeddings=True
    ),
    # A pattern of 3 over 4 layers (a tail of one), local and global rotary bases, linear
    # scaling on the global layers.
    "gemma3-tiny": _gemma3(
        **{**_TINY, **_TINY_IDS, "n_layers": 4},
        n_kv_heads=1,
        head_dim=32,
        mlp_hidden=128,
        window_pattern=(True, True, False),
        sliding_window=8,
        rope_scaling="linear",
        rope_factor=4.0,
        query_pre_attn_scalar=32,
        extra_eos_token_ids=(3,),
    ),
    "olmo2-tiny": _olmo2(**{**_TINY, **_TINY_IDS}, n_kv_heads=2, mlp_hidden=128),
    # 8 experts, top 2, renormalised.
    "mixtral-tiny": _mixtral(**{**_TINY, **_TINY_IDS}, n_kv_heads=2, mlp_hidden=128),
    # 8 experts, top 2 of probabilities not renormalised, narrower experts, and a dense MLP
    # every other layer (decoder_sparse_step 2) of 4: a pattern the layer stack scans in pairs.
    "qwen3-moe-tiny": _qwen3_moe(
        **{**_TINY, **_TINY_IDS, "n_layers": 4},
        n_kv_heads=2,
        head_dim=32,
        mlp_hidden=128,
        expert_hidden=64,
        n_experts=8,
        experts_per_token=2,
        normalize_expert_weights=False,
        moe_every=2,
    ),
}


def presets() -> list[str]:
    """Names of every preset, in catalogue order."""
    return list(_PRESETS)


def get(name: str) -> ModelConfig:
    """The preset called ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    try:
        return _PRESETS[name]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; known presets: {', '.join(_PRESETS)}."
        ) from None
