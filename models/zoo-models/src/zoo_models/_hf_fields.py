"""Reading and writing the ``config.json`` fields that many families share: numbers, activation
names, special token ids, rotary settings, sliding-window layer types.

Reading accepts both the current rotary layout (``rope_parameters``) and the older one
(``rope_theta`` plus ``rope_scaling``); writing emits both, so old and new ``transformers`` read
the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._config import ModelConfig

__all__ = [
    "ACT_IN",
    "ACT_OUT",
    "activation",
    "as_float",
    "layer_types",
    "number",
    "require",
    "rope_in",
    "rope_out",
    "special_ids",
    "window_pattern",
]

#: Hugging Face activation names → ours.
ACT_IN = {
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "gelu_fast": "gelu_tanh",
    "silu": "silu",
    "swish": "silu",
    "relu": "relu",
}
#: Ours → the name the Llama-style families write.
ACT_OUT = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "silu": "silu", "relu": "relu"}


def as_float(hf: Mapping[str, Any], key: str, default: float | None = None) -> float:
    """``hf[key]`` (or ``default``) as a float; ``ValueError`` naming ``key`` if it is none."""
    value = hf.get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`{key}` must be a number, got {value!r}.") from None


def activation(name: object, model_type: str) -> str:
    """Our name of the Hugging Face activation ``name``."""
    if name not in ACT_IN:
        raise ValueError(
            f"unsupported `activation` {name!r} for {model_type}; supported: {', '.join(ACT_IN)}."
        )
    return ACT_IN[name]


def _ids(value: object) -> list[int]:
    # eos_token_id may be a list (several stop tokens).
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]  # type: ignore[call-overload]


def special_ids(hf: Mapping[str, Any]) -> dict[str, Any]:
    """``bos_token_id``, ``eos_token_id`` (its first id; the others as ``extra_eos_token_ids``)
    and ``pad_token_id``."""
    # transformers only warns about ids outside the vocabulary; such an id names no token,
    # so it is dropped rather than failing the load.
    vocab = hf.get("vocab_size")
    out: dict[str, Any] = {}
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        ids = [i for i in _ids(hf.get(name)) if vocab is None or 0 <= i < vocab]
        out[name] = ids[0] if ids else None
        if name == "eos_token_id":
            out["extra_eos_token_ids"] = tuple(dict.fromkeys(ids[1:]))
    return out


def rope_in(hf: Mapping[str, Any], model_type: str) -> dict[str, Any]:
    """The rotary base and scaling fields: ``default``, ``linear``, ``llama3`` or ``yarn``
    scaling."""
    params = hf.get("rope_parameters")
    if not isinstance(params, Mapping):
        # Older layout: rope_theta at the top level, rope_scaling with "type" or "rope_type".
        params = dict(hf.get("rope_scaling") or {})
        params.setdefault("rope_theta", hf.get("rope_theta", 10000.0))
    kind = params.get("rope_type", params.get("type", "default"))
    out: dict[str, Any] = {"rope_theta": as_float(params, "rope_theta", 10000.0)}
    if kind == "default":
        return out
    if kind == "linear":
        return {**out, "rope_scaling": "linear", "rope_factor": as_float(params, "factor")}
    if kind == "llama3":
        original = params.get("original_max_position_embeddings")
        return {
            **out,
            "rope_scaling": "llama3",
            "rope_factor": as_float(params, "factor"),
            "rope_low_freq_factor": as_float(params, "low_freq_factor"),
            "rope_high_freq_factor": as_float(params, "high_freq_factor"),
            "rope_original_max_position": original,
        }
    if kind == "yarn":
        original = params.get("original_max_position_embeddings")
        if original is None:
            raise ValueError(
                f"{model_type} config.json has yarn rope scaling without "
                "original_max_position_embeddings; add it."
            )
        factor = params.get("factor")
        if factor is None:  # transformers' rule: the context's growth
            factor = hf.get("max_position_embeddings", original) / original
        optional = lambda key: None if params.get(key) is None else as_float(params, key)
        return {
            **out,
            "rope_scaling": "yarn",
            "rope_factor": float(factor),
            "rope_original_max_position": int(original),
            "rope_beta_fast": float(params.get("beta_fast") or 32.0),
            "rope_beta_slow": float(params.get("beta_slow") or 1.0),
            "rope_mscale": optional("mscale"),
            "rope_mscale_all_dim": optional("mscale_all_dim"),
            "rope_truncate": bool(params.get("truncate", True)),
            "rope_attention_factor": optional("attention_factor"),
        }
    raise ValueError(
        f"unsupported rope type {kind!r} for {model_type}; supported: default, linear, llama3, "
        "yarn."
    )


def rope_out(config: ModelConfig) -> dict[str, Any]:
    """``rope_parameters``, and ``rope_theta`` with ``rope_scaling`` for older readers."""
    params: dict[str, Any] = {"rope_theta": config.rope_theta, "rope_type": "default"}
    if config.rope_scaling == "linear":
        params = {**params, "rope_type": "linear", "factor": config.rope_factor}
    elif config.rope_scaling == "llama3":
        params = {
            **params,
            "rope_type": "llama3",
            "factor": config.rope_factor,
            "low_freq_factor": config.rope_low_freq_factor,
            "high_freq_factor": config.rope_high_freq_factor,
            "original_max_position_embeddings": config.rope_original_max_position,
        }
    elif config.rope_scaling == "yarn":
        params = {
            **params,
            "rope_type": "yarn",
            "factor": config.rope_factor,
            "original_max_position_embeddings": config.rope_original_max_position,
            "beta_fast": config.rope_beta_fast,
            "beta_slow": config.rope_beta_slow,
            "truncate": config.rope_truncate,
        }
        for key, value in (
            ("mscale", config.rope_mscale),
            ("mscale_all_dim", config.rope_mscale_all_dim),
            ("attention_factor", config.rope_attention_factor),
        ):
            if value is not None:
                params[key] = value
    legacy = {k: v for k, v in params.items() if k != "rope_theta"}
    return {
        "rope_parameters": params,
        "rope_theta": config.rope_theta,
        "rope_scaling": None if config.rope_scaling == "none" else legacy,
    }


def window_pattern(hf: Mapping[str, Any], n_layers: int, model_type: str) -> tuple[bool, ...]:
    """The shortest pattern that ``layer_types`` repeats (True = sliding window layer); the last
    repetition may be cut short (Gemma 3's 26 layers repeat five local and one global)."""
    kinds = hf.get("layer_types")
    if kinds is None:
        return (True,)
    if len(kinds) != n_layers:
        raise ValueError(
            f"`layer_types` lists {len(kinds)} layers, `n_layers` {n_layers}; make them agree."
        )
    unknown = sorted(set(kinds) - {"sliding_attention", "full_attention"})
    if unknown:
        raise ValueError(
            f"{model_type} config.json has layer_types {', '.join(map(repr, unknown))}; "
            "supported: sliding_attention, full_attention."
        )
    return shortest_pattern(tuple(t == "sliding_attention" for t in kinds))


def shortest_pattern(flags: tuple[bool, ...]) -> tuple[bool, ...]:
    """The shortest pattern ``flags`` repeats (its last repetition may be cut short)."""
    n = len(flags)
    for period in range(1, n + 1):
        if all(flags[i] == flags[i % period] for i in range(n)):
            return flags[:period]
    raise AssertionError("unreachable: the full pattern always repeats")


def layer_types(config: ModelConfig) -> list[str]:
    """``layer_types``: each layer's ``sliding_attention`` or ``full_attention``."""
    return [
        "sliding_attention" if config.layer_window(i) is not None else "full_attention"
        for i in range(config.n_layers)
    ]


def require(hf: Mapping[str, Any], model_type: str, *names: str) -> None:
    """``ValueError`` naming the keys of ``names`` that ``hf`` lacks (or holds as null)."""
    missing = [n for n in names if hf.get(n) is None]
    if missing:
        raise ValueError(f"no {', '.join(missing)}, which a {model_type} config.json needs.")


def number(x: float) -> int | float:
    """``x`` as an int when it is integral: transformers declares some float fields as int."""
    return int(x) if float(x).is_integer() else float(x)
