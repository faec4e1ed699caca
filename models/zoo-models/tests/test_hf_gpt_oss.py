"""gpt-oss against ``transformers``: a checkpoint whose experts are stored in MXFP4 (written
here, in the released checkpoints' layout) loads dequantized to transformers' own
dequantization of the same bytes, and exports unquantized. (Logits, gradients, the round trip
and greedy generation of gpt-oss are in test_hf_parity.py and test_hf_gradients.py.)"""

from __future__ import annotations

import json

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import torch
import transformers
from _hf_tiny import SEQ, VOCAB, hf_logits, make_hf_model
from safetensors.numpy import load_file, save_file
from transformers.integrations.mxfp4 import convert_moe_packed_tensors

import zoo_models


def _mxfp4(rng: np.random.Generator, rows_cols: tuple[int, int, int]) -> tuple:
    """Random MXFP4 ``(blocks [E, R, C/32, 16], scales [E, R, C/32])`` for a ``[E, C, R]``
    weight: every code, block exponents around 2^-3."""
    e, c, r = rows_cols
    blocks = rng.integers(0, 256, (e, r, c // 32, 16), dtype=np.uint8)
    scales = rng.integers(121, 126, (e, r, c // 32), dtype=np.uint8)
    return blocks, scales


def test_mxfp4_experts_load_dequantized_and_export_unquantized(tmp_path) -> None:
    hf_dir = tmp_path / "hf"
    reference = make_hf_model("gpt-oss", hf_dir)
    tensors = load_file(hf_dir / "model.safetensors")
    rng = np.random.default_rng(11)
    for i, layer in enumerate(reference.model.layers):
        experts = layer.mlp.experts
        for proj in ("gate_up_proj", "down_proj"):
            name = f"model.layers.{i}.mlp.experts.{proj}"
            blocks, scales = _mxfp4(rng, tuple(tensors.pop(name).shape))
            tensors[f"{name}_blocks"], tensors[f"{name}_scales"] = blocks, scales
            # The reference's experts: transformers' own dequantization of those bytes.
            weight = convert_moe_packed_tensors(
                torch.as_tensor(blocks), torch.as_tensor(scales), dtype=torch.float32
            )
            with torch.no_grad():
                getattr(experts, proj).copy_(weight)
    save_file(tensors, hf_dir / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((hf_dir / "config.json").read_text())
    config["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router"],
    }
    (hf_dir / "config.json").write_text(json.dumps(config))

    model = zoo_models.load_hf(hf_dir)
    ids = np.random.default_rng(12).integers(0, VOCAB, size=(2, SEQ))
    want = hf_logits(reference, ids)
    got = np.asarray(eqx.filter_jit(lambda m, x: m(x))(model, jnp.asarray(ids)))
    err = float(np.abs(got - want).max())
    print(f"gpt-oss from MXFP4: logits max |diff| {err:.2e} (scale {np.abs(want).max():.2f})")
    assert err < 1e-4

    out = zoo_models.save_hf(model, tmp_path / "export")
    saved = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in saved
    assert not any(k.endswith(("_blocks", "_scales")) for k in load_file(out / "model.safetensors"))
    again = transformers.AutoModelForCausalLM.from_pretrained(
        out, attn_implementation="eager", dtype=torch.float32
    ).eval()
    assert np.abs(hf_logits(again, ids) - want).max() < 1e-4
