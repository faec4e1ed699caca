"""LoRA adapters as PEFT adapter directories (``adapter_config.json`` and
``adapter_model.safetensors``), the layout ``peft.PeftModel.from_pretrained`` loads onto the
``transformers`` base model, and back.

PEFT names the adapters of a Hugging Face module ``M`` (a ``torch.nn.Linear``)
``base_model.model.M.lora_A.weight`` ``[r, in]`` and ``….lora_B.weight`` ``[out, r]``, and
scales their product by ``lora_alpha / r``: zoo's ``A``, ``B`` and ``alpha / rank`` exactly. The
module names come from the model's Hugging Face tensor names
(:func:`zoo_models.hf_leaf_names`). GPT-2's ``Conv1D`` modules (``c_proj``, ``c_fc``) store
their weight transposed, but PEFT gives their adapters the same ``[r, in]`` / ``[out, r]``
layout (``fan_in_fan_out`` only changes how it merges), so they map one-to-one too; GPT-2's
fused ``c_attn`` holds q, k and v in one module and has no counterpart for zoo's separate
adapters: such targets are refused before training.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from ._lora import TARGETS, LoRAConfig, LoRALinear, path_name

ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
PREFIX = "base_model.model."
# Hugging Face module names (the last parts) → zoo's LoRA target names. GPT-2's "c_proj" is
# both the attention output and the MLP's down projection.
_HF_TARGETS: dict[str, tuple[str, ...]] = {
    "q_proj": ("q",),
    "k_proj": ("k",),
    "v_proj": ("v",),
    "o_proj": ("o",),
    "gate_proj": ("gate",),
    "up_proj": ("up",),
    "down_proj": ("down",),
    "c_fc": ("up",),
    "attn.c_proj": ("o",),
    "mlp.c_proj": ("down",),
    "c_proj": ("o", "down"),
    "in_proj_qkv": ("qkv",),
    "in_proj_z": ("z",),
    "in_proj_a": ("a",),
    "in_proj_b": ("b",),
    "out_proj": ("out",),
    "q_a_proj": ("q_a",),
    "q_b_proj": ("q_b",),
    "kv_a_proj_with_mqa": ("kv_a",),
    "kv_b_proj": ("kv_b",),
}


def _adapted(model: PyTree) -> list[tuple[str, LoRALinear]]:
    leaves = jax.tree_util.tree_flatten_with_path(
        model, is_leaf=lambda x: isinstance(x, LoRALinear)
    )[0]
    return [(path_name(p), leaf) for p, leaf in leaves if isinstance(leaf, LoRALinear)]


def _module_names(config: Any) -> dict[str, list[str]]:
    """Model projection path → its Hugging Face module names (one per stacked layer), for
    every projection PEFT can adapt."""
    import zoo_models

    names = zoo_models.hf_leaf_names(config, transposed=True)
    return {
        key.removesuffix(".weight"): [n.removesuffix(".weight") for n in value]
        for key, value in names.items()
        if key.endswith(".weight") and all(value)
    }


def _conv1d_modules(config: Any) -> set[str]:
    """The adaptable Hugging Face modules stored transposed (GPT-2's ``Conv1D``)."""
    import zoo_models

    every = {n for names in _module_names(config).values() for n in names}
    direct = {n for names in zoo_models.hf_leaf_names(config).values() for n in names}
    return every - {n.removesuffix(".weight") for n in direct}


def peft_targets(config: Any) -> list[str]:
    """The LoRA targets of a model of ``config`` that PEFT can name (e.g. ``o up down`` for
    GPT-2, whose fused ``c_attn`` it cannot split into q, k and v)."""
    paths = _module_names(config)
    return [t for t, attr in TARGETS.items() if any(p.endswith(f".{attr}") for p in paths)]


def _modules(model: PyTree, path: str) -> list[str]:
    """The Hugging Face module names of the adapted projection at ``path``, one per layer of
    its stacked axis."""
    names = _module_names(model.config).get(path)
    if not names:
        raise ValueError(
            f"The projection {path} has no single Hugging Face module ({model.config.family} "
            "stores it fused with others), so its LoRA adapters cannot be a PEFT adapter; "
            f"choose --lora-targets among {' '.join(peft_targets(model.config))}."
        )
    return names


def check_peft_targets(model: PyTree) -> None:
    """Refuse, before training, adapters that could not be saved as a PEFT adapter.

    Raises:
        ValueError: an adapted projection has no single Hugging Face module.
    """
    for path, _ in _adapted(model):
        _modules(model, path)


def _target_modules(model: PyTree, adapted: list[str]) -> list[str]:
    """PEFT's ``target_modules`` for the modules ``adapted``: for each, the shortest ending of
    its name that names no module left unadapted (``c_proj`` alone would adapt GPT-2's
    attention and MLP output both)."""
    every = {n for names in _module_names(model.config).values() for n in names}
    others = every - set(adapted)
    out = set()
    for name in adapted:
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            tail = ".".join(parts[-k:])
            if not any(o == tail or o.endswith("." + tail) for o in others):
                out.add(tail)
                break
    return sorted(out)


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
    import zoo_models

    directory = pathlib.Path(directory)
    tensors = peft_tensors(model)
    if not tensors:
        raise ValueError("The model has no LoRA adapters to save.")
    adapted = sorted({name[len(PREFIX) :].rsplit(".", 2)[0] for name in tensors})
    modules = _target_modules(model, adapted)
    # PEFT expects the flag set for GPT-2's Conv1D modules (stored [in, out]), clear otherwise.
    conv1d = any(m in _conv1d_modules(model.config) for m in adapted)
    meta = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": config.rank,
        "lora_alpha": config.alpha,
        "lora_dropout": 0.0,
        "target_modules": modules,
        "bias": "none",
        "fan_in_fan_out": conv1d,
        "use_rslora": False,
        "use_dora": False,
        "inference_mode": True,
        "modules_to_save": None,
        "layers_to_transform": None,
    }
    directory.mkdir(parents=True, exist_ok=True)
    zoo_models.save_safetensors(
        {k: np.ascontiguousarray(v) for k, v in tensors.items()},
        directory / ADAPTER_FILE,
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
    # fan_in_fan_out is not a setting of the adapter: PEFT sets it by the module's kind
    # (Conv1D or Linear), and the tensors have the same layout either way.
    unsupported = [k for k in ("use_dora", "use_rslora", "layers_to_transform") if meta.get(k)]
    if meta.get("bias", "none") != "none" or meta.get("modules_to_save"):
        unsupported.append("bias / modules_to_save")
    if unsupported:
        raise ValueError(f"{file} uses {', '.join(unsupported)}, which zoo's LoRA does not have.")
    modules = meta.get("target_modules") or []
    modules = [modules] if isinstance(modules, str) else list(modules)
    targets = [_hf_target(m) for m in modules]
    if not targets or None in targets:
        raise ValueError(
            f"{file} targets {modules}; zoo adapts {', '.join(sorted(_HF_TARGETS))} only."
        )
    return LoRAConfig(
        rank=int(meta["r"]),
        alpha=float(meta["lora_alpha"]),
        targets=tuple(dict.fromkeys(t for found in targets if found for t in found)),
    )


def _hf_target(module: str) -> tuple[str, ...] | None:
    """zoo's targets for a PEFT ``target_modules`` entry (a module name or its ending)."""
    parts = module.split(".")
    for k in (2, 1):
        found = _HF_TARGETS.get(".".join(parts[-k:])) if len(parts) >= k else None
        if found:
            return found
    return None


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
        parts: dict[str, list[np.ndarray]] = {"lora_a": [], "lora_b": []}
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
    out = [fill(path_name(p), leaf) if isinstance(leaf, LoRALinear) else leaf for p, leaf in leaves]
    extra = sorted(set(saved) - used)
    if extra:
        raise ValueError(
            f"The adapter in {directory} holds {extra[0]}, which this model's LoRA layers lack; "
            "use one for this model."
        )
    return jax.tree_util.tree_unflatten(treedef, out)


def save_adapters(
    model: PyTree, directory: str | pathlib.Path, config: LoRAConfig, **info: Any
) -> pathlib.Path:
    """Write only the adapters, as a PEFT adapter directory (``adapter_model.safetensors`` and
    ``adapter_config.json``) that ``peft.PeftModel.from_pretrained`` loads onto the
    ``transformers`` base model.

    ``info["init"]["path"]``, when given, is recorded as the base model's path.
    """
    base = (info.get("init") or {}).get("path")
    return save_peft_adapter(model, directory, config, base=base)


def load_adapters(model: PyTree, directory: str | pathlib.Path) -> PyTree:
    """Put the adapters of a PEFT adapter directory (as :func:`save_adapters` writes) into a
    model with the same LoRA layout.

    Raises:
        ValueError: the saved adapters do not match the model's (names or shapes).
    """
    return load_peft_weights(model, directory)
