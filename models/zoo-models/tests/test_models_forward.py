"""Model-level behaviour: packed documents, positions, dropout, remat, dtype policy, flat compile time."""

import dataclasses
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from models_helpers import BATCH, FAMILY_PRESETS, LENGTH, forward, ids, make_config, tiny_model

import zoo_layers
import zoo_models

jax.config.update("jax_default_matmul_precision", "highest")


def packed_batch(config):
    """Two rows of 20 tokens, each packing pieces of the rows of ``ids(key 6)``.

    Row 0 packs row 0[:11] and row 1[:9]; row 1 packs row 1[:5] and row 0[:15]. By causality a
    document's logits equal the unpacked row's logits over the same prefix.
    """
    rows = ids(jax.random.key(6), config, BATCH, LENGTH)
    tokens = jnp.stack(
        [
            jnp.concatenate([rows[0, :11], rows[1, :9]]),
            jnp.concatenate([rows[1, :5], rows[0, :15]]),
        ]
    )
    segments = jnp.asarray([[0] * 11 + [1] * 9, [4] * 5 + [7] * 15])
    return tokens, segments


# Qwen2, Qwen3 and OLMo 2 keep documents apart as Llama does (the same rotary attention with
# segment ids; their biases and norms act per token): [llama-tiny] covers their path.
_SAME_PACKING_PATH = ("qwen2-tiny", "qwen3-tiny", "olmo2-tiny")


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.full) if n in _SAME_PACKING_PATH else n
     for n in FAMILY_PRESETS],
)  # fmt: skip
def test_packed_documents_equal_separate_documents(name):
    """Packed documents (default positions restart per document) give each document's own logits."""
    model = tiny_model(name)
    rows = ids(jax.random.key(6), model.config, BATCH, LENGTH)
    alone = forward(model, rows)
    tokens, segments = packed_batch(model.config)
    got = forward(model, tokens, segment_ids=segments)
    tol = dict(rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[0, :11], alone[0, :11], **tol)
    np.testing.assert_allclose(got[0, 11:], alone[1, :9], **tol)
    np.testing.assert_allclose(got[1, :5], alone[1, :5], **tol)
    np.testing.assert_allclose(got[1, 5:], alone[0, :15], **tol)
    # Explicit positions that restart per document are the same thing.
    positions = jnp.asarray([list(range(11)) + list(range(9)), list(range(5)) + list(range(15))])
    explicit = forward(model, tokens, positions, segments)
    np.testing.assert_allclose(explicit, got, rtol=1e-6, atol=1e-6)


def test_document_positions():
    seg = jnp.asarray([[3, 3, 3, 5, 5, 7], [1, 1, 1, 1, 2, 2]])
    np.testing.assert_array_equal(
        zoo_models.document_positions(seg), [[0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 0, 1]]
    )


@pytest.mark.parametrize("name", ["llama-tiny", "gpt2-tiny"])
def test_positions_are_used(name):
    """Rotary is relative (a uniform shift changes nothing); learned positions are absolute."""
    model = tiny_model(name)
    tokens = ids(jax.random.key(8), model.config, BATCH, LENGTH)
    base = forward(model, tokens)
    arange = jnp.broadcast_to(jnp.arange(LENGTH), (BATCH, LENGTH))
    shifted = forward(model, tokens, arange + 5)
    spread = forward(model, tokens, 3 * arange)
    assert not np.allclose(base, spread, atol=1e-3)
    if model.config.positional == "rope":
        np.testing.assert_allclose(shifted, base, rtol=1e-4, atol=1e-4)
    else:
        assert not np.allclose(base, shifted, atol=1e-3)


def test_causality():
    """Changing a later token never changes earlier logits."""
    for name in FAMILY_PRESETS:
        model = tiny_model(name)
        tokens = ids(jax.random.key(9), model.config, BATCH, LENGTH)
        changed = tokens.at[:, 7].set((tokens[:, 7] + 1) % model.config.vocab_size)
        a, b = forward(model, tokens), forward(model, changed)
        np.testing.assert_allclose(a[:, :7], b[:, :7], rtol=1e-6, atol=1e-6, err_msg=name)
        assert not np.allclose(a[:, 7:], b[:, 7:], atol=1e-4), name


def test_gemma2_soft_caps_bound_the_logits():
    model = tiny_model("gemma2-tiny")
    logits = forward(model, ids(jax.random.key(10), model.config, BATCH, LENGTH))
    cap = model.config.final_logit_soft_cap
    assert float(jnp.abs(logits).max()) < cap
    assert float(jnp.abs(logits).max()) > 0.5 * cap  # the cap is active at this init scale


def test_dropout_only_with_a_key_and_remat_from_the_config():
    config = make_config("llama-tiny", dropout=0.2, remat=True)
    model = zoo_models.build(config, key=jax.random.key(0))
    assert model.stack.remat  # the scan body is checkpointed (values: see zoo-layers' tests)
    tokens = ids(jax.random.key(11), model.config, BATCH, LENGTH)
    run = eqx.filter_jit(lambda m, x, k: m(x, key=k))
    plain = forward(model, tokens)
    np.testing.assert_allclose(
        plain, forward(tiny_model("llama-tiny"), tokens), rtol=1e-6, atol=1e-6
    )
    a, b = run(model, tokens, jax.random.key(1)), run(model, tokens, jax.random.key(2))
    assert not np.allclose(a, plain, atol=1e-3) and not np.allclose(a, b, atol=1e-3)


def _loss(model, tokens):
    logits = model(tokens[:, :-1])
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))


def test_bfloat16_compute_policy():
    reference = tiny_model("llama-tiny")
    model = dataclasses.replace(
        reference, config=reference.config.replace(compute_dtype="bfloat16")
    )
    tokens = ids(jax.random.key(13), model.config, BATCH, LENGTH)
    want = forward(reference, tokens)
    got = forward(model, tokens)
    assert got.dtype == jnp.float32  # logits are float32 whatever the compute dtype
    err = float(jnp.abs(got - want).max())
    assert 0 < err < 0.05 * float(jnp.abs(want).max()), err
    assert {x.dtype for x in jax.tree_util.tree_leaves(model)} == {jnp.dtype("float32")}


def test_block_traced_once_and_compile_time_flat(monkeypatch):
    """Trace+compile of an N-layer scanned model: the block body is traced once per scan phase."""
    traces = []
    original = zoo_layers.TransformerBlock.apply  # what the stack calls

    def counting(self, *args, **kwargs):
        traces.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(zoo_layers.TransformerBlock, "apply", counting)
    seconds = {}
    for n in (2, 8, 32):
        config = make_config("gemma2-tiny", n_layers=n, scan_layers=True)
        # Abstract parameters are enough to trace and compile; nothing is initialised.
        shape = eqx.filter_eval_shape(zoo_models.build, config, key=jax.random.key(0))
        params, static = eqx.partition(
            shape, lambda x: isinstance(x, jax.Array | jax.ShapeDtypeStruct)
        )
        tokens = jnp.zeros((1, 16), jnp.int32)
        traces.clear()
        start = time.perf_counter()
        jax.jit(lambda p, t, s=static: _loss(eqx.combine(p, s), t)).lower(params, tokens).compile()
        seconds[n] = round(time.perf_counter() - start, 3)
        assert len(traces) == config.period, f"{n} layers: block traced {len(traces)} times"
    print("model trace+compile seconds by depth:", seconds)
