"""``context=N`` in the mesh: each sequence split over N devices gives the one-device run.

The real train step on ``context=4`` and ``fsdp=2,context=4`` meshes against one device, over
several SGD steps (lr 1, so each update is minus the gradient and the losses that follow check
the gradients too), with packed documents that cross the shards' boundaries, a causal model and
a Gemma-style model (sliding-window layers alternating with global ones), through the ``xla``
and ``chunked`` kernels. The sequences are laid out load-balanced inside the step.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest
from mesh_helpers import state_and_step

import zoo_attention
import zoo_models
from zoo_train import parallel
from zoo_train.data import PackedLoader

SEQ = 64  # 4 shards of 16 tokens; balanced: 8 chunks of 8
STEPS = 3
MODELS = {
    "llama": zoo_models.get("llama-tiny").replace(vocab_size=64, n_layers=2),
    "gemma3": zoo_models.get("gemma3-tiny").replace(vocab_size=64, sliding_window=12),
    # Contract 1.3 on a context axis: gpt-oss's sinks (sliding and full layers), DeepSeek-V3's
    # latent attention (values narrower than queries and keys).
    "gpt-oss": zoo_models.get("gpt-oss-tiny").replace(vocab_size=64, sliding_window=12),
    "deepseek-v3": zoo_models.get("deepseek-v3-tiny").replace(vocab_size=64),
}


def _batches(seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 63, rng.integers(5, 40)).astype(np.int32) for _ in range(60)]
    loader = PackedLoader(docs, seq_len=SEQ, seed=seed)
    batches = [loader.next_batch(4) for _ in range(STEPS)]
    ids = batches[0]["segment_ids"]
    # Documents straddle the shard boundaries (every 16 tokens) in the natural layout.
    assert (ids[:, 15::16][:, :-1] == ids[:, 16::16]).any()
    return batches


def _run(config, mesh, batches, kernel: str):
    state, step = state_and_step(config.replace(attention_implementation=kernel), mesh)
    losses, norms = [], []
    with zoo_attention.recording() as log:
        for batch in batches:
            state, metrics = step(batch, state)
            losses.append(float(metrics["loss"]))
            norms.append(float(metrics["grad_norm"]))
    return np.array(losses), np.array(norms), state, log, step


def _mesh(**axes):
    config = parallel.MeshConfig(**{"fsdp": 1, **axes})
    n = int(np.prod(list(config.to_dict().values())))
    return parallel.make_mesh(config, jax.devices()[:n])


@pytest.fixture(scope="module")
def batches():
    return _batches(int(np.random.default_rng().integers(1 << 30)))


def _full(axes: dict, model: str, kernel: str):
    return pytest.param(axes, model, kernel, marks=pytest.mark.full, id=f"{axes}-{model}-{kernel}")


# Each mesh and each family's attention once: gpt-oss's sliding layers alternating with full
# ones and its sinks, DeepSeek-V3's latent attention (the xla kernel on a context axis against
# float64: test_context_attention.py).
CASES = [
    ({"context": 4}, "gpt-oss", "chunked"),
    ({"fsdp": 2, "context": 4}, "deepseek-v3", "chunked"),
    # This mesh kept in {'context': 4}-gpt-oss-chunked, xla in test_context_attention.py.
    _full({"context": 4}, "llama", "xla"),
    # Sliding layers alternating with global ones, chunked: kept in {'context': 4}-gpt-oss-chunked.
    _full({"context": 4}, "gemma3", "chunked"),
    # The fsdp+context mesh on chunked: kept in {'fsdp': 2, 'context': 4}-deepseek-v3-chunked.
    _full({"fsdp": 2, "context": 4}, "llama", "chunked"),
    # This mesh kept in {'fsdp': 2, 'context': 4}-deepseek-v3-chunked, xla as above.
    _full({"fsdp": 2, "context": 4}, "gemma3", "xla"),
]


@pytest.mark.parametrize(("axes", "model", "kernel"), CASES, ids=str)
def test_context_axis_gives_the_one_device_losses_and_gradients(model, kernel, axes, batches):
    config = MODELS[model]
    want, want_norms, want_state, _, _ = _run(config, _mesh(), batches, kernel)
    got, norms, state, log, step = _run(config, _mesh(**axes), batches, kernel)
    np.testing.assert_allclose(got, want, rtol=2e-5)
    np.testing.assert_allclose(norms, want_norms, rtol=2e-5)
    # After the steps the parameters (minus the sum of the gradients) agree, to float32
    # reduction-order noise relative to each array's scale.
    leaves = zip(*map(jax.tree.leaves, (state.params, want_state.params)), strict=True)
    for a, b in leaves:
        a, b = np.asarray(a), np.asarray(b)
        assert np.max(np.abs(a - b)) <= 1e-4 * np.max(np.abs(b))
    # Attention ran sequence-sharded: the kernel saw one chunk of the balanced layout.
    assert {r.kernel for r in log.resolutions} == {kernel}
    assert {r.spec.q_len for r in log.resolutions} == {SEQ // 8}
    assert all(r.spec.kv_len == SEQ for r in log.resolutions)
    text = step.lower(batches[0], state).as_text()
    assert "all_gather" in text
