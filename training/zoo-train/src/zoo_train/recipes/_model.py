"""The model a run trains: a preset built from scratch, or a checkpoint to fine-tune."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any

from .._model_sources import checkpoint_dtype_of, load_hf_on_mesh, tokenizer_source
from .._usage import UsageError
from ..parallel import is_primary
from ..settings import FinetuneSettings, RunSettings
from ._mesh import check_positions


@dataclasses.dataclass
class Model:
    """The model of a run and what it came from.

    Attributes:
        model: the model placed on the mesh, or a zero-argument builder when a resumed run's
            checkpoint provides the weights.
        config: its ``zoo_models.ModelConfig``.
        tokenizer: the tokenizer it reads.
        init: how it was obtained (recorded in the run and compared on resume).
        provenance: the provenance of the checkpoint it was loaded from, if any.
    """

    model: Any
    config: Any
    tokenizer: Any
    init: dict[str, Any]
    provenance: dict[str, Any] | None = None


def check_model_changes(changes: dict[str, Any]) -> None:
    import zoo_models

    unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(zoo_models.ModelConfig)})
    if unknown:
        raise UsageError(
            f"Unknown setting `model_config.{unknown[0]}`; model_config takes the fields of "
            "zoo_models.ModelConfig (e.g. d_model, n_layers, n_heads, mlp_hidden)."
        )


#: A vocabulary from a real tokenizer is rounded up to a multiple of this (TPU-friendly shapes).
VOCAB_MULTIPLE = 128


def vocabulary_for(tokenizer: Any) -> int:
    """The model vocabulary a tokenizer asks for: its own size, rounded up to a multiple of
    :data:`VOCAB_MULTIPLE` unless it is the byte tokenizer (whose small models stay exact)."""
    from zoo_data import is_byte_level

    n = int(tokenizer.vocab_size)
    return n if is_byte_level(tokenizer) else -(-n // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def run_tokenizer(s: RunSettings, out: pathlib.Path) -> Any:
    """The tokenizer ``zoo train`` trains with: ``--tokenizer`` (its files copied into the run,
    so it travels into generate, eval and exports), else the byte tokenizer."""
    from zoo_data import byte_tokenizer

    from .._run_directory import TOKENIZER_DIR, copy_tokenizer_files

    if s.tokenizer is None:
        return byte_tokenizer()
    import zoo_models

    source = tokenizer_source(None, s.tokenizer)
    try:
        tokenizer = zoo_models.load_tokenizer(source)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if is_primary():
        copy_tokenizer_files(source, out / TOKENIZER_DIR)
    return tokenizer


def preset_config(s: RunSettings, tokenizer: Any | None = None) -> Any:
    """The ``ModelConfig`` of the preset with the settings' changes and attention kernel.

    With a ``tokenizer`` (a run from scratch) the vocabulary is sized to it unless set; without
    one (``zoo compile``) the preset keeps its own.
    """
    import zoo_models

    try:
        config = zoo_models.get(s.model)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    changes = dict(s.model_config)
    check_model_changes(changes)
    if tokenizer is not None:
        changes.setdefault("vocab_size", vocabulary_for(tokenizer))
        if changes["vocab_size"] < tokenizer.vocab_size:
            raise UsageError(
                f"model_config.vocab_size {changes['vocab_size']} is smaller than the tokenizer's "
                f"{tokenizer.vocab_size} ids; raise it."
            )
        if tokenizer.eos_id is not None and config.eos_token_id is None:
            changes.setdefault("eos_token_id", tokenizer.eos_id)
        # A preset's special ids beyond the tokenizer's vocabulary (GPT-2's 50256 with the byte
        # tokenizer) name no token: the tokenizer's own stand in for them.
        own = {"bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id}
        for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
            preset_id = getattr(config, name)
            if preset_id is not None and preset_id >= changes["vocab_size"]:
                changes.setdefault(name, own.get(name))
    changes["attention_implementation"] = s.attention.implementation
    try:
        config = config.replace(**changes)
    except (ValueError, TypeError) as e:
        raise UsageError(f"model_config: {e}") from None
    check_positions(config, s.seq_len)
    return config


def scratch_model(
    s: RunSettings, config: Any, tokenizer: Any, mesh: Any, rules: Any, *, resuming: bool
) -> Model:
    """A fresh model of ``config``, built directly sharded on ``mesh``; when resuming, only its
    builder (the checkpoint provides the weights)."""
    import equinox as eqx
    import jax

    import zoo_models

    from ..parallel import init_sharded, tree_shardings

    def build() -> Any:
        return zoo_models.build(config, key=jax.random.key(s.seed))

    init = {"kind": "random", "preset": s.model, "seed": s.seed}
    if not resuming:
        shardings = tree_shardings(eqx.filter_eval_shape(build), mesh, rules)
        build = init_sharded(build, mesh=mesh, shardings=shardings)
    return Model(build, config, tokenizer, init)


def source_model(s: FinetuneSettings, out: pathlib.Path, mesh: Any, rules: Any) -> Model:
    """The model to fine-tune, placed on ``mesh``: from ``--from-hf`` or ``--from-run``. Its
    tokenizer files and generation settings are copied into the run directory ``out``."""
    from .._run_directory import (
        TOKENIZER_DIR,
        copy_tokenizer_files,
        read_generation,
        write_generation,
    )

    if (s.from_hf is None) == (s.from_run is None):
        raise UsageError("zoo finetune needs exactly one of --from-hf DIR or --from-run DIR.")
    out.mkdir(parents=True, exist_ok=True)
    loaded = _from_hf(s, mesh, rules) if s.from_hf is not None else _from_run(s, mesh, rules)
    if is_primary():
        source = pathlib.Path(s.from_hf or s.from_run)  # type: ignore[arg-type]
        tokenizer_files = (
            tokenizer_source(source, s.tokenizer) if s.from_hf else source / TOKENIZER_DIR
        )
        copy_tokenizer_files(tokenizer_files, out / TOKENIZER_DIR)
        write_generation(read_generation(source), out)
    return loaded


def hf_config_changes(s: FinetuneSettings) -> dict[str, Any]:
    """What ``zoo finetune --from-hf`` changes in the checkpoint's config: ``model_config``
    (checked), float32 master weights whatever the checkpoint's dtype (see ``_precision``)
    unless asked otherwise, and the attention kernel."""
    changes = dict(s.model_config)
    check_model_changes(changes)
    changes.setdefault("param_dtype", "float32")
    changes["attention_implementation"] = s.attention.implementation
    return changes


def _from_hf(s: FinetuneSettings, mesh: Any, rules: Any) -> Model:
    source = pathlib.Path(s.from_hf)  # type: ignore[arg-type]
    if not (source / "config.json").is_file():
        raise UsageError(
            f"{s.from_hf!r} is not a Hugging Face model directory (no config.json); pass one."
        )
    model, tokenizer = load_hf_on_mesh(
        source, mesh, rules, tokenizer=s.tokenizer, **hf_config_changes(s)
    )
    init = {"kind": "hf", "path": str(source.resolve()), "dtype": checkpoint_dtype_of(source)}
    return Model(model, model.config, tokenizer, init)


def _from_run(s: FinetuneSettings, mesh: Any, rules: Any) -> Model:
    from .._run_directory import load_run
    from ..peft import merge_lora

    if s.model_config:
        raise UsageError("model_config cannot change a model loaded with --from-run; drop it.")
    loaded = load_run(
        s.from_run,  # type: ignore[arg-type]
        attention_implementation=s.attention.implementation,
        mesh=mesh,
        rules=rules,
    )
    model = merge_lora(loaded.model) if loaded.lora is not None else loaded.model
    src = pathlib.Path(s.from_run)  # type: ignore[arg-type]
    init = {"kind": "run", "path": str(src.resolve()), "step": loaded.step}
    dtype = ((loaded.meta.get("run_info") or {}).get("init") or {}).get("dtype")
    if dtype is not None:
        init["dtype"] = dtype  # still exported in the dtype of the original checkpoint
    return Model(model, model.config, loaded.tokenizer, init, loaded.meta.get("provenance"))
