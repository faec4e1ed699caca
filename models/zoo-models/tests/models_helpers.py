"""Tiny models shared by the model tests (built once per process per config)."""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp

import zoo_models

FAMILY_PRESETS = (
    "gpt2-tiny",
    "llama-tiny",
    "mistral-tiny",
    "qwen2-tiny",
    "gemma2-tiny",
    "qwen3-tiny",
    "gemma3-tiny",
    "olmo2-tiny",
)


def make_config(name: str, **changes: object) -> zoo_models.ModelConfig:
    """The preset in float32, with a larger init so every feature moves the logits.

    Gemma's attention soft cap is lowered so that it binds at this scale.
    """
    config = zoo_models.get(name).replace(
        compute_dtype="float32", init_std=0.2, attention_implementation="xla"
    )
    if config.family == "gemma2":
        config = config.replace(attn_logit_soft_cap=2.0, final_logit_soft_cap=5.0)
    return config.replace(**changes) if changes else config


@functools.cache
def tiny_model(name: str, **changes: object) -> zoo_models.Transformer:
    return zoo_models.build(make_config(name, **changes), key=jax.random.key(0))


def ids(key: jax.Array, config: zoo_models.ModelConfig, batch: int, length: int) -> jax.Array:
    return jax.random.randint(key, (batch, length), 0, config.vocab_size)


@eqx.filter_jit
def forward(model, input_ids, positions=None, segment_ids=None):
    return model(input_ids, positions=positions, segment_ids=segment_ids)


@eqx.filter_jit
def decode(model, input_ids, cache, attention_mask=None):
    return model.decode(input_ids, cache, attention_mask=attention_mask)


# Tests share these shapes so that compiled programs are reused across tests.
BATCH, LENGTH, MAX_LEN = 2, 20, 24
CHUNKS = (7, 5) + (1,) * 8


def decode_in_chunks(model, input_ids, chunks=CHUNKS, max_len=MAX_LEN, attention_mask=None):
    """Logits of ``input_ids`` fed to ``decode`` in chunks of the given sizes."""
    cache = model.init_cache(input_ids.shape[0], max_len)
    if attention_mask is None:
        attention_mask = jnp.ones(input_ids.shape, bool)
    outs, start = [], 0
    for c in chunks:
        mask = attention_mask[:, start : start + c]
        logits, cache = decode(model, input_ids[:, start : start + c], cache, mask)
        outs.append(logits)
        start += c
    return jnp.concatenate(outs, axis=1), cache
