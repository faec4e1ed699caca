"""Tiny random Hugging Face models of every family, built locally (no downloads)."""

from __future__ import annotations

import pathlib

import torch
import transformers

VOCAB = 128
SEQ = 16  # longer than the sliding windows below, so the window matters

_COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)

_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 10000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}

QWEN3_5 = dict(
    **{**_COMMON, "num_hidden_layers": 6},
    head_dim=16,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=12,
    rope_parameters={"rope_type": "default", "rope_theta": 5000.0, "partial_rotary_factor": 0.5},
)

CONFIGS = {
    "gpt2": lambda: transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "gpt2-untied": lambda: transformers.GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=64,
        n_inner=48,
        activation_function="gelu",
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "llama3": lambda: transformers.LlamaConfig(
        **_COMMON,
        rope_parameters=dict(_LLAMA3_ROPE),
    ),
    "llama-linear": lambda: transformers.LlamaConfig(
        **_COMMON,
        rope_parameters={"rope_type": "linear", "rope_theta": 500.0, "factor": 4.0},
        attention_bias=True,
        mlp_bias=True,
    ),
    "mistral": lambda: transformers.MistralConfig(**_COMMON, sliding_window=4),
    "qwen2": lambda: transformers.Qwen2Config(**_COMMON, tie_word_embeddings=True),
    "qwen2-sliding": lambda: transformers.Qwen2Config(
        **_COMMON, use_sliding_window=True, sliding_window=4, max_window_layers=1
    ),
    "gemma2": lambda: transformers.Gemma2Config(
        **_COMMON,
        head_dim=16,  # heads * head_dim != hidden_size, as in real Gemma 2
        sliding_window=4,
        query_pre_attn_scalar=12,
        attn_logit_softcapping=2.0,
        final_logit_softcapping=3.0,
    ),
    # head_dim independent of hidden_size / heads, per-head qk-norm, tied.
    "qwen3": lambda: transformers.Qwen3Config(**_COMMON, head_dim=16, tie_word_embeddings=True),
    # Untied, multi-query, sliding window from layer 1 on, linear RoPE scaling.
    "qwen3-sliding": lambda: transformers.Qwen3Config(
        **{**_COMMON, "num_key_value_heads": 1},
        head_dim=8,
        tie_word_embeddings=False,
        use_sliding_window=True,
        sliding_window=4,
        max_window_layers=1,
        rope_parameters={"rope_type": "linear", "rope_theta": 5000.0, "factor": 2.0},
    ),
    # Three layers repeating local, global (a pattern that leaves a tail), separate local and
    # global rotary bases with linear scaling on the global layers only.
    "gemma3": lambda: transformers.Gemma3TextConfig(
        **{**_COMMON, "num_hidden_layers": 3},
        head_dim=16,
        sliding_window=4,
        sliding_window_pattern=2,
        query_pre_attn_scalar=12,
        rope_parameters={
            "full_attention": {"rope_type": "linear", "rope_theta": 1000.0, "factor": 4.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
        },
    ),
    # Untied, multi-query, a soft cap kept, every layer but the last local.
    "gemma3-untied": lambda: transformers.Gemma3TextConfig(
        **{**_COMMON, "num_key_value_heads": 1},
        head_dim=8,
        tie_word_embeddings=False,
        sliding_window=3,
        layer_types=["sliding_attention", "full_attention"],
        final_logit_softcapping=4.0,
    ),
    "olmo2": lambda: transformers.Olmo2Config(**{**_COMMON, "num_key_value_heads": 4}),
    # Grouped queries, biases, Llama 3 RoPE scaling.
    "olmo2-gqa": lambda: transformers.Olmo2Config(
        **_COMMON,
        attention_bias=True,
        rope_parameters=dict(_LLAMA3_ROPE),
    ),
    # 4 experts, top 2 renormalised, a sliding window; the load-balancing loss on.
    "mixtral": lambda: transformers.MixtralConfig(
        **_COMMON,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=4,
        output_router_logits=True,
        router_aux_loss_coef=0.02,
    ),
    # 8 experts, top 3 probabilities as they are, narrower experts, a dense MLP on the even
    # layers of 3 (decoder_sparse_step 2: a scanned pair and a tail).
    "qwen3-moe": lambda: transformers.Qwen3MoeConfig(
        **{**_COMMON, "num_hidden_layers": 3},
        head_dim=16,
        num_experts=8,
        num_experts_per_tok=3,
        moe_intermediate_size=24,
        decoder_sparse_step=2,
        norm_topk_prob=False,
    ),
    # Top 2 renormalised, tied, and layer 0 dense by mlp_only_layers.
    "qwen3-moe-dense-first": lambda: transformers.Qwen3MoeConfig(
        **{**_COMMON, "num_hidden_layers": 3},
        head_dim=8,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        mlp_only_layers=[0],
        norm_topk_prob=True,
        tie_word_embeddings=True,
    ),
    # Three gated DeltaNet layers to each gated attention layer over 6 layers (a tail of two),
    # grouped DeltaNet heads of unequal key and value widths, half of each head rotated.
    "qwen3.5": lambda: transformers.Qwen3_5TextConfig(**QWEN3_5),
    # Every layer a mixture of 4 experts (top 2) with a gated shared expert; tied.
    "qwen3.5-moe": lambda: transformers.Qwen3_5MoeTextConfig(
        **{**QWEN3_5, "num_hidden_layers": 4},
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=24,
        shared_expert_intermediate_size=40,
        tie_word_embeddings=True,
    ),
    # Sinks, sliding and full layers alternating (two scanned pairs), YaRN over a context of 8
    # (not truncated), attention, router and expert biases, the clamped SwiGLU (a limit low
    # enough to bind at this scale), 8 experts top 2.
    "gpt-oss": lambda: transformers.GptOssConfig(
        **{**_COMMON, "num_hidden_layers": 4},
        head_dim=16,
        num_local_experts=8,
        num_experts_per_tok=2,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"] * 2,
        swiglu_limit=1.5,
        max_position_embeddings=32,  # the YaRN factor times the original context
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
            "original_max_position_embeddings": 8,
        },
    ),
    # Latent attention with a query bottleneck, interleaved rotary under YaRN with DeepSeek's
    # mscale (scaling the softmax), one dense layer then two with 8 routed experts in 4 groups
    # (top 2 groups, top 2 experts) and a shared expert.
    "deepseek-v3": lambda: transformers.DeepseekV3Config(
        **{**_COMMON, "num_hidden_layers": 3, "num_key_value_heads": 4},
        moe_intermediate_size=16,
        n_shared_experts=1,
        n_routed_experts=8,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        kv_lora_rank=16,
        q_lora_rank=24,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=12,
        routed_scaling_factor=2.5,
        max_position_embeddings=32,  # the YaRN factor times the original context
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 8,
            "mscale": 1.0,
            "mscale_all_dim": 0.8,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
    ),
    # No query bottleneck (Moonlight's), rotary in halves, attention biases, one group, two
    # shared experts, top-3 weights not renormalised, tied.
    "deepseek-v3-q-full": lambda: transformers.DeepseekV3Config(
        **{**_COMMON, "num_key_value_heads": 4},
        moe_intermediate_size=16,
        n_shared_experts=2,
        n_routed_experts=6,
        num_experts_per_tok=3,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=1,
        kv_lora_rank=16,
        q_lora_rank=None,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        routed_scaling_factor=1.5,
        norm_topk_prob=False,
        rope_interleave=False,
        attention_bias=True,
        tie_word_embeddings=True,
    ),
}


def gemma3_image_text_config() -> transformers.Gemma3Config:
    """An image-and-text Gemma 3 (``model_type: gemma3``) whose language model is tiny, with an
    end-of-turn id beside EOS at the top level, as the published instruction-tuned ones."""
    text = transformers.Gemma3TextConfig(
        **_COMMON, head_dim=16, sliding_window=4, sliding_window_pattern=2, query_pre_attn_scalar=12
    )
    vision = dict(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    return transformers.Gemma3Config(
        text_config=text.to_dict(),
        vision_config=vision,
        mm_tokens_per_image=4,
        boi_token_index=VOCAB - 3,
        eoi_token_index=VOCAB - 2,
        image_token_index=VOCAB - 1,
        eos_token_id=[2, 5],
    )


# The noise every parameter gets (std), where 0.2 does not suit: at 0.2 a tiny Qwen3.5's
# recurrences amplify float32 rounding until transformers' own float32 logits are 1.1e-3 from
# its float64 ones over 150 tokens; at 0.05 they stay within 4e-6 (zoo's likewise).
NOISE = {"qwen3.5": 0.05, "qwen3.5-moe": 0.05}


def make_hf_model(
    name: str, directory: pathlib.Path, seed: int = 0
) -> transformers.PreTrainedModel:
    """A random model of config ``name`` saved with ``save_pretrained`` in ``directory``.

    Every parameter (norm weights and biases included) gets noise (std 0.2 unless
    :data:`NOISE` says otherwise), so none sits at its identity initialisation where a mapping
    mistake would go unnoticed.
    """
    noise = NOISE.get(name, 0.2)
    torch.manual_seed(seed)
    if name == "gemma3-image-text":
        model = transformers.Gemma3ForConditionalGeneration._from_config(
            gemma3_image_text_config(), attn_implementation="eager", dtype=torch.float32
        )
    else:
        model = transformers.AutoModelForCausalLM.from_config(
            CONFIGS[name](), attn_implementation="eager", dtype=torch.float32
        )
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * torch.randn_like(p))
        # DeepSeek's selection bias is a buffer: moved too, so the routing it shifts shows.
        for buffer_name, buffer in model.named_buffers():
            if buffer_name.endswith("e_score_correction_bias"):
                buffer.add_(noise * torch.randn_like(buffer))
    model.eval()
    model.save_pretrained(directory)
    return model


def hf_logits(model: transformers.PreTrainedModel, ids, positions=None):
    """float32 numpy logits of a transformers model."""
    with torch.no_grad():
        kwargs = {} if positions is None else {"position_ids": torch.as_tensor(positions)}
        return model(torch.as_tensor(ids), **kwargs).logits.float().numpy()
