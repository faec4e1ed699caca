"""``load_hf`` / ``save_hf``: local Hugging Face checkpoint directories in and out.

Loading builds the model's structure without allocating (``eqx.filter_eval_shape``), checks
every tensor of the checkpoint against it (missing, unexpected and mis-shaped tensors are
reported together, by name), then fills the leaves. Layers are stacked per scan phase, as
:class:`zoo_layers.LayerStack` keeps them. Nothing here touches the network.
"""

from __future__ import annotations

import json
import logging
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from zoo_data import ByteTokenizer, HFTokenizer
from zoo_data import ZooTokenizer as Tokenizer
from zoo_layers import layer_slot

from ._config import ModelConfig
from ._hf_config import from_hf_config, to_hf_config
from ._hf_weights import IGNORABLE, Rule, same, transpose
from ._memory import check_fits_host
from ._model import Transformer, build
from ._safetensors_files import FLOAT_DTYPES, TensorFiles, write_tensor_files
from .families import lookup

__all__ = [
    "from_hf_state_dict",
    "generation_config",
    "hf_leaf_names",
    "hf_state_dict",
    "load_hf",
    "read_generation_config",
    "save_hf",
    "stop_token_ids",
]

CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"

logger = logging.getLogger("zoo_models")


def _path_name(path: tuple[Any, ...]) -> str:
    parts = []
    for entry in path:
        if isinstance(entry, jax.tree_util.GetAttrKey):
            parts.append(entry.name)
        elif isinstance(entry, jax.tree_util.SequenceKey):
            parts.append(str(entry.idx))
        elif isinstance(entry, jax.tree_util.DictKey):
            parts.append(str(entry.key))
        else:
            parts.append(str(entry))
    return ".".join(parts)


def _leaves(model: Any) -> tuple[dict[str, Any], Any]:
    """``{leaf path: leaf}`` in flattening order, and the treedef to rebuild the model."""
    flat, treedef = jax.tree_util.tree_flatten_with_path(model)
    return {_path_name(path): leaf for path, leaf in flat}, treedef


def _instances(config: ModelConfig) -> list[tuple[Rule, int | None]]:
    """Every (rule, layer) pair of the checkpoint; ``layer`` is ``None`` for top-level rules."""
    family = lookup(config.family)
    top: list[tuple[Rule, int | None]] = [(r, None) for r in family.top_rules(config)]
    return top + [(r, i) for i in range(config.n_layers) for r in family.layer_rules(config, i)]


def _leaf_key(config: ModelConfig, rel: str, layer: int | None) -> tuple[str, int | None]:
    """The model leaf path of ``rel`` and, for layers, the index along its stacked axis."""
    if layer is None:
        return rel, None
    path, index = layer_slot(layer, config.n_layers, config.period)
    return f"stack.{path}.{rel}", index


def _expected_hf_shapes(
    rule: Rule, layer: int | None, config: ModelConfig, shapes: Mapping[str, Any]
) -> list[tuple[int, ...]]:
    structs = []
    for rel in rule.ours:
        key, group = _leaf_key(config, rel, layer)
        s = shapes[key]
        structs.append(jax.ShapeDtypeStruct(s.shape[1:] if group is not None else s.shape, s.dtype))
    return [tuple(o.shape) for o in jax.eval_shape(rule.to_hf, structs)]


def _shape_of(tensors: Mapping[str, Any], name: str) -> tuple[int, ...]:
    # Checkpoint files (and views of them) answer from their headers, without reading.
    shape = getattr(tensors, "shape", None)
    if callable(shape):
        return tuple(shape(name))
    return tuple(np.shape(tensors[name]))


def _dtype_of(tensors: Mapping[str, Any], name: str) -> str:
    """The stored dtype's name (``float16``, ``bfloat16``, ``int32``, ...), from the header for
    files."""
    dtype = getattr(tensors, "dtype", None)
    if callable(dtype):
        return str(dtype(name))
    return jnp.dtype(np.asarray(tensors[name]).dtype).name


def _check_finite(name: str, array: np.ndarray, source: str) -> None:
    if array.dtype.kind in "iub":  # refused above by dtype; nothing to check in a mapping's ints
        return
    if not bool(np.isfinite(array).all()):
        raise ValueError(
            f"{source}: tensor {name} holds NaN or infinite values; the checkpoint is damaged "
            "or diverged, so load another one."
        )


def _note_casts(casts: dict[tuple[str, str], list[str]], source: str) -> None:
    for (stored, wanted), names in sorted(casts.items()):
        logger.warning(
            "note: %s: %d tensor(s) stored as %s are cast to %s (e.g. %s)",
            source,
            len(names),
            stored,
            wanted,
            names[0],
        )


def _ignorable(name: str, config: ModelConfig) -> bool:
    """Whether tensor ``name`` may be present in a checkpoint without a model leaf."""
    if config.tie_embeddings and name in ("lm_head.weight", "language_model.lm_head.weight"):
        return True  # a tied head stored next to the embedding
    patterns = (*IGNORABLE, *lookup(config.family).ignorable)
    return any(re.fullmatch(p, name) for p in patterns)


def _first_few(items: list[str], *, sep: str = ", ", shown: int = 3) -> str:
    # A whole model's tensors would make a page of a sentence: the first few and a count.
    rest = len(items) - shown
    return sep.join(items[:shown]) + (f"{sep}and {rest} more" if rest > 0 else "")


def from_hf_state_dict(
    config: ModelConfig,
    tensors: Mapping[str, Any],
    *,
    source: str = "the checkpoint",
    shardings: Any = None,
) -> Transformer:
    """A :class:`Transformer` for ``config`` from Hugging Face-named tensors.

    ``tensors`` maps names to arrays (numpy, jax, or anything ``np.asarray`` takes). Every
    tensor is checked first; the error names each missing, mis-shaped, unexpected or
    non-floating-point one (integer and bool tensors are refused; other float dtypes are cast to
    the parameter dtype, with a note), and a tensor holding NaN or inf is refused by name.
    Weights are assembled on the host and each leaf is placed once: on its sharding from
    ``shardings`` (a tree of ``jax.sharding.Sharding`` structured like the model's arrays, e.g.
    from ``zoo_train.parallel.tree_shardings``), else on the default device. With shardings no
    device ever holds the whole model.
    """
    abstract = eqx.filter_eval_shape(build, config, key=jax.random.key(0))
    shapes, treedef = _leaves(abstract)
    tensors = lookup(config.family).view(tensors, config, source)
    names = set(tensors)
    # Expected name → stored name, for checkpoints that store the family's tensors otherwise.
    alias = lookup(config.family).aliases(names)
    instances = _instances(config)

    missing: list[str] = []
    wrong: list[str] = []
    used: set[str] = set()
    for rule, layer in instances:
        for name, want in zip(
            rule.names(layer), _expected_hf_shapes(rule, layer, config, shapes), strict=True
        ):
            stored = alias.get(name, name)
            if stored not in names:
                missing.append(f"{name} {want}")
                continue
            used.add(stored)
            got = _shape_of(tensors, stored)
            if got != want:
                wrong.append(f"{stored} has shape {got}, expected {want}")
            dtype = _dtype_of(tensors, stored)
            if dtype not in FLOAT_DTYPES:
                wrong.append(f"{stored} holds {dtype} values, not float16/bfloat16/float32 weights")
    unexpected = sorted(n for n in names - used if not _ignorable(n, config))
    problems = []
    if missing:
        problems.append(f"missing tensor(s) {_first_few(missing)}")
    if wrong:
        problems.append(_first_few(wrong, sep="; "))
    if unexpected:
        problems.append(f"unexpected tensor(s) {_first_few(unexpected)}")
    if problems:
        raise ValueError(
            f"{source} does not match its {config.family} config: {'; '.join(problems)}."
        )

    values: dict[str, Any] = {}
    stacked: dict[str, list[Any]] = {}
    casts: dict[tuple[str, str], list[str]] = {}
    for rule, layer in instances:
        arrays = []
        for n in rule.names(layer):
            arrays.append(np.asarray(tensors[alias.get(n, n)]))
            _check_finite(alias.get(n, n), arrays[-1], source)
        for rel, array in zip(rule.ours, rule.to_ours(arrays), strict=True):
            key, group = _leaf_key(config, rel, layer)
            array = np.asarray(array)
            if array.dtype != shapes[key].dtype:
                casts.setdefault((array.dtype.name, shapes[key].dtype.name), []).append(key)
            array = array.astype(shapes[key].dtype)
            if group is None:
                values[key] = array
            else:
                stacked.setdefault(key, [None] * shapes[key].shape[0])[group] = array
    values.update({key: np.stack(parts) for key, parts in stacked.items()})
    _note_casts(casts, source)
    unfilled = sorted(set(shapes) - set(values))
    if unfilled:
        raise RuntimeError(f"no checkpoint tensor maps to model leaves {', '.join(unfilled)}.")
    if shardings is None:
        placed = [jnp.asarray(values[k]) for k in shapes]
    else:
        targets = jax.tree_util.tree_leaves(shardings)
        if len(targets) != len(shapes):
            raise ValueError(
                f"`shardings` has {len(targets)} leaves but the model has {len(shapes)} arrays."
            )
        placed = [jax.device_put(values[k], t) for k, t in zip(shapes, targets, strict=True)]
    return jax.tree_util.tree_unflatten(treedef, placed)


def hf_leaf_names(config: ModelConfig, *, transposed: bool = False) -> dict[str, list[str]]:
    """Model leaf path → the Hugging Face tensor it is, for leaves stored one-to-one (no
    transpose, split or fusion; with ``transposed``, GPT-2's transposed ``Conv1D`` weights
    too): one name, or for a leaf stacked over layers one name per entry along its leading
    axis, e.g. ``"stack.blocks.0.attn.q_proj.weight"`` →
    ``["model.layers.0.self_attn.q_proj.weight", ...]``. Names adapter formats (PEFT) by."""
    kept = (same, transpose) if transposed else (same,)
    names: dict[str, list[str]] = {}
    for rule, layer in _instances(config):
        if len(rule.hf) != 1 or len(rule.ours) != 1 or rule.to_ours not in kept:
            continue
        key, group = _leaf_key(config, rule.ours[0], layer)
        slots = names.setdefault(key, [])
        index = 0 if group is None else group
        slots.extend([""] * (index + 1 - len(slots)))
        slots[index] = rule.names(layer)[0]
    return names


def hf_state_dict(model: Transformer) -> dict[str, np.ndarray]:
    """The model's parameters as Hugging Face-named numpy arrays (the checkpoint layout)."""
    config = _config_of(model)
    leaves, _ = _leaves(eqx.filter(model, eqx.is_array))
    out: dict[str, np.ndarray] = {}
    for rule, layer in _instances(config):
        parts = []
        for rel in rule.ours:
            key, group = _leaf_key(config, rel, layer)
            parts.append(leaves[key] if group is None else leaves[key][group])
        for name, array in zip(rule.names(layer), rule.to_hf(parts), strict=True):
            out[name] = np.asarray(array)
    return out


def _config_of(model: Any) -> ModelConfig:
    config = getattr(model, "config", None)
    if not isinstance(config, ModelConfig):
        raise ValueError(
            f"expected a zoo model (built by zoo_models.build), got {type(model).__name__}."
        )
    return config


def _dtype_name(dtype: Any) -> str:
    try:
        return jnp.dtype(dtype).name
    except TypeError:
        raise ValueError(
            f"dtype {dtype!r} is not a dtype; use e.g. 'float32' or 'bfloat16'."
        ) from None


def load_hf(
    path: str | pathlib.Path, *, dtype: Any = None, shardings: Any = None, **config_changes: Any
) -> Transformer:
    """Load a local Hugging Face checkpoint directory (``config.json`` plus safetensors).

    Args:
        path: a directory with ``config.json`` and ``model.safetensors`` or sharded
            ``model-*.safetensors`` with ``model.safetensors.index.json``.
        dtype: parameter dtype (e.g. ``"float32"``, ``"bfloat16"``); ``None`` keeps the dtype
            the checkpoint's ``config.json`` declares (float32 if it declares none).
        shardings: where to place each parameter (see :func:`from_hf_state_dict`); a function
            of the abstract model returning such a tree is accepted too.
        config_changes: runtime :class:`ModelConfig` fields to set, e.g.
            ``compute_dtype="bfloat16"``, ``remat=True``, ``attention_implementation="xla"``.

    Returns:
        The :class:`Transformer`; its ``config.family`` is the checkpoint's ``model_type``.
    """
    path = pathlib.Path(path)
    if not path.is_dir():
        raise ValueError(
            f"checkpoint directory {str(path)!r} does not exist; pass a local directory "
            "(checkpoints are never downloaded)."
        )
    config_file = path / CONFIG_FILE
    if not config_file.is_file():
        raise ValueError(f"{path} has no {CONFIG_FILE}; pass a Hugging Face checkpoint directory.")
    try:
        hf = json.loads(config_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{config_file} is not valid JSON ({e}); fix it.") from None
    if not isinstance(hf, dict):
        raise ValueError(
            f"{config_file} holds a JSON {type(hf).__name__}, not an object of model settings; "
            "pass a Hugging Face config.json."
        )
    if dtype is not None:
        config_changes["param_dtype"] = _dtype_name(dtype)
    config = from_hf_config(hf, source=str(config_file), **config_changes)
    check_fits_host(config, source=str(config_file))
    if callable(shardings):
        shardings = shardings(eqx.filter_eval_shape(build, config, key=jax.random.key(0)))
    return from_hf_state_dict(config, TensorFiles(path), source=str(path), shardings=shardings)


def save_hf(
    model: Transformer,
    path: str | pathlib.Path,
    *,
    max_shard_size: int | str = "5GB",
    tokenizer: Tokenizer | None = None,
    generation: Mapping[str, Any] | None = None,
) -> pathlib.Path:
    """Write ``model`` as a Hugging Face checkpoint that ``transformers`` loads.

    Writes ``config.json`` (with ``model_type`` and ``architectures``) and safetensors in the
    model's parameter dtype, and ``generation_config.json`` with the special ids (``generation``,
    e.g. the source checkpoint's :func:`read_generation_config`, is written over them: its stop
    tokens and sampling settings are kept); above ``max_shard_size`` (bytes, or e.g. ``"2GB"``)
    the weights are sharded with a ``model.safetensors.index.json``. A ``tokenizer``
    (:class:`HFTokenizer` or :class:`ByteTokenizer`) is written beside the weights as
    ``tokenizer.json`` and ``tokenizer_config.json``, so ``AutoTokenizer`` loads the directory.
    Returns ``path``.
    """
    config = _config_of(model)
    hf = to_hf_config(config)  # refuses configs the family cannot express, before writing
    tensors = hf_state_dict(model)
    path = pathlib.Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} is a file; save_hf needs a directory path.")
    write_tensor_files(path, tensors, max_shard_size=max_shard_size)
    (path / CONFIG_FILE).write_text(json.dumps(hf, indent=2, sort_keys=True) + "\n")
    settings = {**generation_config(config, tokenizer), **(generation or {})}
    # Settings of their own now: transformers re-derives a config marked as made from
    # config.json from it, and the one written here keeps only the first of several EOS ids.
    settings.pop("_from_model_config", None)
    (path / GENERATION_CONFIG_FILE).write_text(json.dumps(settings, indent=2) + "\n")
    if isinstance(tokenizer, HFTokenizer | ByteTokenizer):
        tokenizer.save(path)
    return path


def generation_config(config: ModelConfig, tokenizer: Tokenizer | None = None) -> dict[str, Any]:
    """``generation_config.json``: the special ids ``transformers`` generation stops and pads
    with (the tokenizer's where the model config names none)."""
    out: dict[str, Any] = {}
    for name, value in (
        ("bos_token_id", config.bos_token_id),
        ("eos_token_id", config.eos_token_id),
        ("pad_token_id", config.pad_token_id),
    ):
        if value is None and tokenizer is not None and name != "pad_token_id":
            value = tokenizer.bos_id if name == "bos_token_id" else tokenizer.eos_id
        if value is not None:
            out[name] = int(value)
    if config.extra_eos_token_ids:
        out["eos_token_id"] = list(config.eos_token_ids)
    return out


_SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def read_generation_config(path: str | pathlib.Path) -> dict[str, Any]:
    """The generation settings ``transformers`` uses for the Hugging Face directory ``path``:
    its ``generation_config.json`` when it holds a JSON object, else the special ids of its
    ``config.json`` (``{}`` when neither names any). ``eos_token_id`` may be a list: every id
    in it ends generation (instruction-tuned checkpoints stop at their end-of-turn token)."""
    path = pathlib.Path(path)
    for name in (GENERATION_CONFIG_FILE, CONFIG_FILE):
        try:
            settings = json.loads((path / name).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(settings, dict):
            continue
        if name == GENERATION_CONFIG_FILE:
            return settings
        return {k: settings[k] for k in _SPECIAL_IDS if settings.get(k) is not None}
    return {}


def stop_token_ids(
    generation: Mapping[str, Any], tokenizer: Tokenizer | None = None
) -> tuple[int, ...]:
    """The ids that end generation, as ``transformers`` stops: ``eos_token_id`` of the
    generation settings (an id or a list of ids), else the tokenizer's EOS (else none)."""
    eos = generation.get("eos_token_id")
    ids = eos if isinstance(eos, list) else [eos]
    found = tuple(int(i) for i in ids if isinstance(i, int) and not isinstance(i, bool))
    if found:
        return found
    if tokenizer is not None and tokenizer.eos_id is not None:
        return (int(tokenizer.eos_id),)
    return ()
