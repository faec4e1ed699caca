"""LoRA adapters as PEFT adapter directories (``adapter_config.json`` and
``adapter_model.safetensors``), the layout ``peft.PeftModel.from_pretrained`` loads onto the
``transformers`` base model, and back.

PEFT names the adapters of a Hugging Face module ``M`` (a ``torch.nn.Linear``)
``base_model.model.M.lora_A.weight`` ``[r, in]`` and ``….lora_B.weight`` ``[out, r]``, and
scales their product by ``lora_alpha / r``: zoo's ``A``, ``B`` and ``alpha / rank`` exactly. The
module names come from the model's Hugging Face tensor names
(:func:`zoo_models.hf_leaf_names`); a projection stored fused or transposed there (GPT-2's
``c_attn``) has no PEFT counterpart and is refused.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ._lora import ADAPTER_CONFIG, ADAPTER_FILE, TARGETS, LoRAConfig, LoRALinear, _path_name

PREFIX = "base_model.model."
# Hugging Face module names (the last part) → zoo's LoRA target names.
_HF_TARGETS = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
}


def _adapted(model: PyTree) -> list[tuple[str, LoRALinear]]:
    leaves = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, LoRALinear)
    )[0]
    return [(_path_name(p), leaf) for p, leaf in leaves if isinstance(leaf, LoRALinear)]


def _modules(model: PyTree, path: str) -> list[str]:
    """The Hugging Face module names of the adapted projection at ``path``, one per layer of
    its stacked axis."""
    import zoo_models

    names = zoo_models.hf_leaf_names(model.config).get(f"{path}.weight")
    if not names or not all(names):
        raise ValueError(
            f"The projection {path} has no one-to-one Hugging Face tensor, so its adapters have "
            f"no PEFT name ({model.config.family}); adapt other targets, e.g. q v."
        )
    return [n.removesuffix(".weight") for n in names]


def peft_tensors(model: PyTree) -> dict[str, np.ndarray]:
    """The adapters of ``model`` under PEFT's names (host float32 numpy)."""
    out: dict[str, np.ndarray] = {}
    for path, leaf in _adapted(model):
        a, b = np.asarray(leaf.lora_a, np.float32), np.asarray(leaf.lora_b, np.float32)
        for i, module in enumerate(_modules(model, path)):
            out[f"{PREFIX}{module}.lora_A.weight"] = a[i] if a.ndim == 3 else a
            out[f"{PREFIX}{module}.lora_B.weight"] = b[i] if b.ndim == 3 else b
    return out


def save_peft_adapter(
    model: PyTree, directory: str | pathlib.Path, config: LoRAConfig, *, base: str | None = None
) -> pathlib.Path:
    """Write the adapters of ``model`` as a PEFT adapter directory; ``base`` (the base model's
    directory) is recorded as ``base_model_name_or_path``."""
    from safetensors.numpy import save_file

    directory = pathlib.Path(directory)
    tensors = peft_tensors(model)
    if not tensors:
        raise ValueError("The model has no LoRA adapters to save.")
    modules = sorted({name.split(".")[-3] for name in tensors})
    meta = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": config.rank,
        "lora_alpha": config.alpha,
        "lora_dropout": 0.0,
        "target_modules": modules,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "inference_mode": True,
        "modules_to_save": None,
        "layers_to_transform": None,
    }
    directory.mkdir(parents=True, exist_ok=True)
    save_file(
        {k: np.ascontiguousarray(v) for k, v in tensors.items()},
        str(directory / ADAPTER_FILE),
        metadata={"format": "pt"},
    )
    (directory / ADAPTER_CONFIG).write_text(json.dumps(meta, indent=2) + "\n")
    return directory


def read_peft_config(directory: str | pathlib.Path) -> LoRAConfig:
    """The LoRA settings of a PEFT adapter directory.

    Raises:
        ValueError: not a PEFT LoRA directory, or one using what zoo's LoRA lacks (DoRA,
            rsLoRA, biases, a subset of layers, extra trained modules).
    """
    directory = pathlib.Path(directory)
    file = directory / ADAPTER_CONFIG
    if not file.is_file() or not (directory / ADAPTER_FILE).is_file():
        raise ValueError(
            f"{str(directory)!r} is not a PEFT adapter directory ({ADAPTER_CONFIG} and "
            f"{ADAPTER_FILE}); pass one."
        )
    meta: dict[str, Any] = json.loads(file.read_text())
    if meta.get("peft_type") != "LORA":
        raise ValueError(f"{file} holds a {meta.get('peft_type')!r} adapter; only LORA is read.")
    unsupported = [
        k
        for k in ("use_dora", "use_rslora", "fan_in_fan_out", "layers_to_transform")
        if meta.get(k)
    ]
    if meta.get("bias", "none") != "none" or meta.get("modules_to_save"):
        unsupported.append("bias / modules_to_save")
    if unsupported:
        raise ValueError(f"{file} uses {', '.join(unsupported)}, which zoo's LoRA does not have.")
    modules = meta.get("target_modules") or []
    modules = [modules] if isinstance(modules, str) else list(modules)
    targets = [_HF_TARGETS.get(m.split(".")[-1]) for m in modules]
    if not targets or None in targets:
        raise ValueError(
            f"{file} targets {modules}; zoo adapts {', '.join(sorted(_HF_TARGETS))} only."
        )
    return LoRAConfig(
        rank=int(meta["r"]), alpha=float(meta["lora_alpha"]), targets=tuple(dict.fromkeys(targets))
    )


def load_peft_weights(model: PyTree, directory: str | pathlib.Path) -> PyTree:
    """``model`` (with LoRA layers matching the adapter's settings, see
    :func:`read_peft_config`) with the adapters of a PEFT directory put in.

    Raises:
        ValueError: a tensor is missing, mis-shaped, or left over.
    """
    from safetensors.numpy import load_file

    directory = pathlib.Path(directory)
    saved = {
        k.replace(".default.", "."): v for k, v in load_file(str(directory / ADAPTER_FILE)).items()
    }
    used: set[str] = set()

    def fill(path: str, leaf: LoRALinear) -> LoRALinear:
        parts = {"lora_a": [], "lora_b": []}
        for module in _modules(model, path):
            for part, suffix in (("lora_a", "lora_A"), ("lora_b", "lora_B")):
                name = f"{PREFIX}{module}.{suffix}.weight"
                if name not in saved:
                    raise ValueError(
                        f"The adapter in {directory} lacks {name}; use one for this model."
                    )
                used.add(name)
                parts[part].append(saved[name])
        new = {}
        for part, arrays in parts.items():
            current = getattr(leaf, part)
            array = np.stack(arrays) if current.ndim == 3 else arrays[0]
            if array.shape != current.shape:
                raise ValueError(
                    f"The adapter in {directory} has {part} of shape {array.shape} for {path}, "
                    f"expected {current.shape}; use one for this model."
                )
            new[part] = jnp.asarray(array, current.dtype)
        return LoRALinear(
            base=leaf.base, lora_a=new["lora_a"], lora_b=new["lora_b"], scale=leaf.scale
        )

    leaves, treedef = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, LoRALinear)
    )
    out = [
        fill(_path_name(p), leaf) if isinstance(leaf, LoRALinear) else leaf for p, leaf in leaves
    ]
    extra = sorted(set(saved) - used)
    if extra:
        raise ValueError(
            f"The adapter in {directory} holds {extra[0]}, which this model's LoRA layers lack; "
            "use one for this model."
        )
    return jax.tree_util.tree_unflatten(treedef, out)


__all__ = ["TARGETS", "load_peft_weights", "peft_tensors", "read_peft_config", "save_peft_adapter"]
