"""The kernel swap is invisible to the model: every family gives the same logits on every kernel."""

import jax
import numpy as np
import pytest
from models_helpers import BATCH, FAMILY_PRESETS, LENGTH, decode_in_chunks, forward, ids, tiny_model
from test_models_forward import packed_batch

import zoo_attention

jax.config.update("jax_default_matmul_precision", "highest")

KERNELS = ("chunked", "flash_tpu")
# Qwen3 and OLMo 2 ask nothing of a kernel that Llama and Gemma 3 do not (their qk-norms act
# before attention); Gemma 3 brings a pattern with a tail and local and global layers.
KERNEL_PRESETS = tuple(n for n in FAMILY_PRESETS if n not in ("qwen3-tiny", "olmo2-tiny"))
# Contract 1.3's families on the TPU kernel (interpret mode): gpt-oss's sinks and DeepSeek-V3's
# values narrower than its queries and keys. (On CPU their training runs on chunked, the
# default there, in zoo-train's tests.)
ATTENTION_2026 = ("gpt-oss-tiny", "deepseek-v3-tiny")


@pytest.fixture(autouse=True)
def _interpret_flash(monkeypatch: pytest.MonkeyPatch):
    # flash_tpu serves on CPU in Pallas TPU interpret mode.
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    monkeypatch.delenv(zoo_attention.ENV_VAR, raising=False)


def _with_kernel(name: str, kernel: str):
    if kernel not in zoo_attention.kernels():
        refused = {r.name: r.reason for r in zoo_attention.refused_kernels()}
        pytest.fail(f"kernel {kernel!r} is not registered: {refused.get(kernel, 'not installed')}")
    # Same parameters as the xla model: only the static implementation field differs.
    return tiny_model(name, attention_implementation=kernel)


# On flash_tpu (interpret mode, the costly one) Gemma 2 asks every 2024 feature of it (causal,
# segments, GQA, a window on its local layers, the soft cap, its own scale); the other families
# ask a subset of those and run on chunked here, on flash_tpu in make test-full. Qwen2's biases
# act before attention: [llama-tiny-chunked] covers its path.
_FULL = {("qwen2-tiny", "chunked")} | {
    (n, "flash_tpu") for n in KERNEL_PRESETS if n != "gemma2-tiny"
}
FORWARD_CASES = [
    pytest.param(n, k, marks=pytest.mark.full) if (n, k) in _FULL else (n, k)
    for n, k in [(n, k) for n in KERNEL_PRESETS for k in KERNELS]
    + [(n, "flash_tpu") for n in ATTENTION_2026]
]


@pytest.mark.parametrize(("name", "kernel"), FORWARD_CASES)
def test_forward_and_packed_logits_match_xla(name, kernel):
    reference = tiny_model(name)
    model = _with_kernel(name, kernel)
    tokens, segments = packed_batch(model.config)
    want = forward(reference, tokens, segment_ids=segments)
    with zoo_attention.recording() as log:
        got = forward(model, tokens, segment_ids=segments)
    assert log.last.kernel == kernel
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize(
    "kernel",
    [
        "chunked",
        # The model's decode through a kernel is [chunked]'s path; flash_tpu at a query offset
        # is kernels/flash-tpu's test_flash_query_offset.py.
        pytest.param("flash_tpu", marks=pytest.mark.full),
    ],
)
def test_cached_decoding_matches_xla(kernel):
    """Gemma 2 has both kinds of layer: windowed (local) and global."""
    reference = tiny_model("gemma2-tiny")
    model = _with_kernel("gemma2-tiny", kernel)
    tokens = ids(jax.random.key(5), model.config, BATCH, LENGTH)
    want = forward(reference, tokens)
    got, _ = decode_in_chunks(model, tokens)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
