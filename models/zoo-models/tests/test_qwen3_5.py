"""Qwen3.5 against transformers (PyTorch, CPU, float32, the torch fallbacks of its gated DeltaNet
as references): the gated delta rule itself, logits and gradients over several chunks, the
language model of an image-and-text checkpoint, packed documents, and generation from
left-padded prompts."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from _hf_tiny import CONFIGS, NOISE, QWEN3_5, VOCAB, hf_logits, make_hf_model
from transformers.models.qwen3_5 import modeling_qwen3_5 as hf_qwen

import zoo_models
from zoo_attention import linear

TOL = 1e-4
# Gradients relative to max(1, their largest entry). Those of the decay's parameters (A_log,
# dt_bias) sum many small terms and carry float32 rounding of a few 1e-5 in transformers and
# in zoo alike (measured worst: 8.1e-5 dense, 4.4e-5 MoE).
GRAD_TOL = 2e-4
LONG = 150  # three chunks of the chunked kernels, the last one partial


@pytest.mark.parametrize("implementation", ["recurrent", "chunked_xla"])
def test_the_gated_delta_rule_equals_transformers_recurrence(implementation):
    rng = np.random.default_rng()
    b, t, k, n, dk, dv = 2, 70, 2, 4, 16, 12
    q, key = (rng.standard_normal((b, t, k, dk)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((b, t, n, dv)).astype(np.float32)
    g = -np.exp(rng.standard_normal((b, t, n)) - 1.5).astype(np.float32)
    beta = (1 / (1 + np.exp(-rng.standard_normal((b, t, n))))).astype(np.float32)
    state = rng.standard_normal((b, n, dk, dv)).astype(np.float32)
    out, final = linear.gated_delta_rule(
        *(jnp.asarray(x) for x in (q, key, v, g, beta)),
        normalize_qk=True,
        initial_state=jnp.asarray(state),
        implementation=implementation,
    )
    tq, tk, tv, tg, tb, ts = (torch.as_tensor(x) for x in (q, key, v, g, beta, state))
    want, want_final = hf_qwen.torch_recurrent_gated_delta_rule(
        tq, tk, tv, tg, tb, initial_state=ts, output_final_state=True, use_qk_l2norm_in_kernel=True
    )
    np.testing.assert_allclose(np.asarray(out), want.numpy(), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(np.asarray(final), want_final.numpy(), atol=2e-5, rtol=2e-5)


@pytest.fixture(scope="module", params=["qwen3.5", "qwen3.5-moe"])
def pair(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    reference = make_hf_model(request.param, directory)
    return request.param, reference, zoo_models.load_hf(directory)


def _long_ids(seed: int = 5, low: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(low, VOCAB, size=(2, LONG))


def test_logits_over_several_chunks_equal_transformers(pair):
    name, reference, model = pair
    ids = _long_ids()
    want = hf_logits(reference, ids)
    got = np.asarray(eqx.filter_jit(lambda m, x: m(x))(model, jnp.asarray(ids)))
    err = float(np.abs(got - want).max())
    print(
        f"{name}: logits over {LONG} tokens, max |diff| {err:.2e} (scale {np.abs(want).max():.2f})"
    )
    assert err < TOL


def test_gradients_of_every_parameter_equal_transformers(pair):
    name, reference, model = pair
    # No pad token (id 0): transformers' embedding gives its row no gradient.
    ids = _long_ids(6, low=1)
    cot = np.random.default_rng(7).standard_normal((2, LONG, VOCAB)).astype(np.float32)
    reference.zero_grad()
    logits = reference(torch.as_tensor(ids)).logits
    (logits * torch.as_tensor(cot)).sum().backward()
    theirs = {n: p.grad.numpy() for n, p in reference.named_parameters() if p.grad is not None}

    @eqx.filter_jit  # compiled: a fraction of the cost of autodiff op by op
    @eqx.filter_grad
    def grads(m):
        return jnp.sum(m(jnp.asarray(ids)) * jnp.asarray(cot))

    ours = zoo_models.hf_state_dict(grads(model))
    # transformers keeps the experts fused; zoo names them one by one, as checkpoints do.
    hf_names = set(reference.state_dict())
    worst = 0.0
    for hf_name, want in theirs.items():
        if hf_name.endswith("experts.gate_up_proj") or hf_name.endswith("experts.down_proj"):
            prefix = hf_name.rsplit(".", 1)[0]
            e = want.shape[0]
            if hf_name.endswith("gate_up_proj"):
                half = want.shape[1] // 2
                got = np.stack(
                    [np.concatenate([ours[f"{prefix}.{i}.gate_proj.weight"],
                                     ours[f"{prefix}.{i}.up_proj.weight"]]) for i in range(e)]
                )  # fmt: skip
                assert got.shape[1] == 2 * half
            else:
                got = np.stack([ours[f"{prefix}.{i}.down_proj.weight"] for i in range(e)])
        else:
            got = ours[hf_name]
        scale = max(1.0, float(np.abs(want).max()))
        err = float(np.abs(got - want).max()) / scale
        worst = max(worst, err)
        assert err < GRAD_TOL, (hf_name, err)
    assert hf_names  # every trained tensor was compared
    print(f"{name}: {len(theirs)} parameter gradients, worst relative |diff| {worst:.2e}")


def test_packed_documents_equal_each_document_alone(pair):
    _, _, model = pair
    ids = _long_ids(8)[:1]
    # The second document starts inside the second chunk; both documents are 75 tokens, so
    # one compiled program runs each alone.
    cut = 75
    segments = jnp.asarray((np.arange(LONG) >= cut).astype(np.int32))[None]
    run = eqx.filter_jit(lambda m, x, s: m(x, segment_ids=s))
    packed = np.asarray(run(model, jnp.asarray(ids), segments))
    first = np.asarray(run(model, jnp.asarray(ids[:, :cut]), None))
    second = np.asarray(run(model, jnp.asarray(ids[:, cut:]), None))
    np.testing.assert_allclose(packed[:, :cut], first, atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(packed[:, cut:], second, atol=2e-5, rtol=2e-5)


def test_the_language_model_of_an_image_text_checkpoint_loads_and_writes_back(tmp_path):
    text = transformers.Qwen3_5TextConfig(**QWEN3_5)
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=32,
                  patch_size=14, temporal_patch_size=2, spatial_merge_size=2)  # fmt: skip
    config = transformers.Qwen3_5Config(text_config=text.to_dict(), vision_config=vision)
    torch.manual_seed(0)
    full = transformers.Qwen3_5ForConditionalGeneration._from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for p in full.parameters():
            p.add_(NOISE["qwen3.5"] * torch.randn_like(p))
    full.eval().save_pretrained(tmp_path / "image-text")
    model = zoo_models.load_hf(tmp_path / "image-text")
    assert model.config.family == "qwen3_5_text" and model.config.n_linear_layers == 5
    ids = _long_ids(9)[:, :40]
    want = hf_logits(full, ids)
    got = np.asarray(eqx.filter_jit(lambda m, x: m(x))(model, jnp.asarray(ids)))
    assert np.abs(got - want).max() < TOL
    zoo_models.save_hf(model, tmp_path / "text")
    causal = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "text").eval()
    assert type(causal).__name__ == "Qwen3_5ForCausalLM"
    assert np.abs(hf_logits(causal, ids) - want).max() < TOL


def test_greedy_generation_from_left_padded_prompts_equals_transformers(pair):
    name, reference, model = pair
    prompts = [[5, 9, 17, 33, 4, 8, 11], [21, 13, 6]]
    ids, mask = zoo_models.left_pad(prompts, pad_id=0)
    with torch.no_grad():
        theirs = reference.generate(
            torch.as_tensor(np.asarray(ids)),
            attention_mask=torch.as_tensor(np.asarray(mask)),
            do_sample=False,
            max_new_tokens=12,
            min_new_tokens=12,
            pad_token_id=0,
        ).numpy()
    ours = np.asarray(
        zoo_models.generate(model, ids, prompt_mask=mask, max_new_tokens=12, greedy=True)
    )
    np.testing.assert_array_equal(ours, theirs)
    print(f"{name}: greedy from left-padded prompts {ours[:, ids.shape[1] :].tolist()}")


def test_the_presets_are_transformers_defaults_for_9b_and_35b_a3b():
    # Qwen3_5TextConfig's defaults are Qwen3.5-9B's, Qwen3_5MoeTextConfig's Qwen3.5-35B-A3B's.
    for preset, hf in (
        ("qwen3.5-9b", transformers.Qwen3_5TextConfig()),
        ("qwen3.5-35b-a3b", transformers.Qwen3_5MoeTextConfig()),
    ):
        read = zoo_models.from_hf_config(hf.to_dict())
        want = zoo_models.get(preset)
        ignore = ("max_position", "rope_theta", "output_router_logits", "param_dtype")
        diff = {
            f.name: (getattr(read, f.name), getattr(want, f.name))
            for f in dataclasses.fields(want)
            if f.name not in ignore and getattr(read, f.name) != getattr(want, f.name)
        }
        assert not diff, (preset, diff)
        assert zoo_models.num_params(want) > 1e9


def test_every_tiny_config_reads_back_from_its_own_config_json():
    for name in ("qwen3.5-tiny", "qwen3.5-moe-tiny"):
        config = zoo_models.get(name)
        assert zoo_models.from_hf_config(zoo_models.to_hf_config(config)) == config
        assert name in zoo_models.presets()
    assert "qwen3.5" in CONFIGS
