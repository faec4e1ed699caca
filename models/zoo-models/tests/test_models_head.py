"""Every family's ``hidden_and_head``: the head's logits are the model's, and its cross entropy
through the fused contract (``fused_xla``, the default) equals the plain cross entropy of those
logits, for tied and untied heads, Gemma's soft cap, mixtures of experts, sinks, latent attention
and gated DeltaNet layers."""

import equinox as eqx
import jax
import numpy as np
import pytest
from models_helpers import BATCH, FAMILY_PRESETS, LENGTH, forward, ids, tiny_model

import zoo_attention
from zoo_attention.cross_entropy import token_losses

jax.config.update("jax_default_matmul_precision", "highest")


_PLAIN_HEADS = ("mistral-tiny", "qwen2-tiny", "qwen3-tiny", "olmo2-tiny")


@eqx.filter_jit
def _head_outputs(model, input_ids, targets):
    hidden, head, _ = model.hidden_and_head(input_ids)
    ce, log_z = head.cross_entropy(hidden, targets)
    return head.logits(hidden), ce, log_z, head.greedy(hidden)


@pytest.mark.parametrize(
    "name",
    [
        # Mistral, Qwen2, Qwen3 and OLMo 2 end in an untied or tied head without a soft cap, as
        # Llama and GPT-2 (kept) do.
        *[
            pytest.param(n, marks=pytest.mark.full) if n in _PLAIN_HEADS else n
            for n in FAMILY_PRESETS
        ],
        "mixtral-tiny",
        # Expert layers, sinks and latent attention end in the same head as Mixtral's experts
        # and the dense families' attention (kept); each family's logits meet transformers'.
        pytest.param("qwen3-moe-tiny", marks=pytest.mark.full),
        pytest.param("gpt-oss-tiny", marks=pytest.mark.full),
        pytest.param("deepseek-v3-tiny", marks=pytest.mark.full),
        "qwen3.5-tiny",
        # Gated DeltaNet layers as [qwen3.5-tiny], experts as [mixtral-tiny].
        pytest.param("qwen3.5-moe-tiny", marks=pytest.mark.full),
    ],
)
def test_head_gives_the_models_logits_and_the_fused_cross_entropy(name, monkeypatch):
    monkeypatch.delenv(zoo_attention.cross_entropy.ENV_VAR, raising=False)
    model = tiny_model(name)
    tokens = ids(jax.random.key(3), model.config, BATCH, LENGTH + 1)
    input_ids, targets = tokens[:, :-1], tokens[:, 1:]
    with zoo_attention.recording() as log:
        logits, ce, log_z, greedy = _head_outputs(model, input_ids, targets)
    assert [r.kernel for r in log.cross_entropy] == ["fused_xla"]
    want = forward(model, input_ids)
    np.testing.assert_allclose(logits, want, rtol=1e-5, atol=1e-5)
    want_ce, want_log_z = token_losses(want, targets)
    np.testing.assert_allclose(ce, want_ce, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(log_z, want_log_z, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(greedy, np.argmax(np.asarray(want), -1))
    head = model.output_head()
    tied = model.lm_head is None
    assert head.weight is (model.embed.weight if tied else model.lm_head.weight)
    assert head.soft_cap == model.config.final_logit_soft_cap
