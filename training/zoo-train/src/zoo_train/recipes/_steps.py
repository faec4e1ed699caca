"""The steps every recipe shares, in the order a recipe takes them: the refusals made before
anything heavy is loaded, a finished run found as it is, the output directory held, the mesh,
the model (a preset from scratch, or a checkpoint to fine-tune) and its LoRA adapters, the data,
the trainer, the lines a user reads around training, and after it the export and the sample."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import math
import os
import pathlib
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from .._errors import CheckpointMismatchError
from .._model_sources import checkpoint_dtype_of, load_hf_on_mesh, tokenizer_source
from .._usage import UsageError
from ..checkpoint import run_lock
from ..loop import Trainer, TrainResult
from ..parallel import is_primary
from ..peft import ADAPTER_DIR, LoRAConfig, SaveAdapters, add_adapters, read_peft_config
from ..settings import (
    MAX_STEPS,
    OBJECTIVES,
    EvalHarnessSettings,
    FinetuneSettings,
    RunSettings,
    compared,
    flat,
)
from ..tracking import Trackers
from ._stores import data_cache, eval_stores, slug, training_stores

_S = TypeVar("_S", bound=RunSettings)

# --- Lines for the user ------------------------------------------------------------------------


def say(message: str) -> None:
    """A line for the user, from process 0 only (tqdm.write keeps an open progress bar intact)."""
    from tqdm.auto import tqdm

    if is_primary():
        tqdm.write(message, file=sys.stderr)


def open_trackers(s: RunSettings, out: pathlib.Path) -> Trackers:
    """The trackers the settings name, writing into ``out`` (none but on process 0)."""
    from .. import tracking

    wandb = tracking.WandbOptions(s.wandb.project, s.wandb.name, tuple(s.wandb.tags))
    return tracking.open_trackers(s.trackers, out, wandb=wandb, enabled=is_primary())


# --- Refusals, before anything heavy is imported or written ------------------------------------


def check_data_paths(paths: list[str]) -> None:
    """Refuse empty or missing paths before anything heavy is imported."""
    for path in paths:
        if not path.strip():
            raise UsageError("--data got an empty path; pass a file, directory or glob with text.")
        if any(c in path for c in "*?["):
            if not glob.glob(path, recursive=True):
                raise UsageError(f"The data glob {path!r} matches no files; pass an existing path.")
        elif not os.path.exists(path):
            raise UsageError(
                f"The data path {path!r} does not exist; pass a file, directory or glob with text."
            )


def check_run(s: RunSettings) -> None:
    """The output directory, the data paths, the trackers, the kernel's version range and
    name."""
    from .._requirements import check_requirement
    from ..tracking import tracker_names

    check_data_paths(s.data)
    check_outputs(s)
    try:
        tracker_names(s.trackers)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if s.attention.require is not None:
        check_requirement(s.attention.require)
    name = s.attention.implementation
    if name is None:
        return
    import zoo_attention

    if name not in zoo_attention.kernels():
        raise UsageError(
            f"attention.implementation {name!r} is not an installed kernel; installed: "
            f"{', '.join(sorted(zoo_attention.kernels()))}."
        )


def _globbed(paths: list[str]) -> list[str]:
    """``paths`` with each glob replaced by what it matches."""
    out: list[str] = []
    for path in paths:
        out += glob.glob(path, recursive=True) if any(c in path for c in "*?[") else [path]
    return out


def run_inputs(s: RunSettings) -> list[str | None]:
    """Every path a run reads: its data, tokenizer, task files, and for a fine-tune its model,
    adapter, teacher and reward files."""
    inputs: list[str | None] = [*_globbed([*s.data, *s.eval_data]), s.tokenizer]
    inputs.append(s.eval_harness.include_path)
    if isinstance(s, FinetuneSettings):
        inputs += [s.from_hf, s.from_run, s.lora.from_, s.teacher]
        inputs += [spec.rsplit(":", 1)[0] for spec in s.grpo.reward if ".py:" in spec]
    return inputs


def check_outputs(s: RunSettings) -> None:
    """``--out`` and the data cache: never the filesystem root or a system directory, never
    an input or a path inside one (checked before anything is read or written). A run only
    adds to them, so they may hold an input (a reward file kept with the run)."""
    from zoo_data import check_output_path, is_store, system_directory

    inputs = run_inputs(s)
    try:
        check_output_path(s.out, inputs, flag="--out", may_hold_inputs=True)
        raw = not s.data or not all(is_store(p) for p in [*s.data, *s.eval_data])
        if raw:  # raw data is prepared into the data cache
            cache = data_cache(s)
            flag = "--data-cache" if s.data_cache is not None else "the data cache"
            check_output_path(cache, inputs, flag=flag, may_hold_inputs=True)
            where = system_directory(cache.parent) if s.data_cache is None else None
            if where is not None:
                raise ValueError(
                    f"The data cache would be {str(cache)!r}, in {where}; pass --data-cache DIR "
                    "or an --out inside a directory of your own."
                )
    except ValueError as e:
        raise UsageError.from_error(e) from None


def finetune_model_error() -> UsageError:
    """A preset named for ``zoo finetune``, whose model comes from its source instead."""
    return UsageError(
        "--model names a preset for zoo train; zoo finetune takes its model from --from-hf "
        "or --from-run, so drop --model."
    )


def objective_error(name: str) -> UsageError:
    """An ``--objective`` that is none of :data:`~zoo_train.settings.OBJECTIVES`."""
    return UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}; got {name!r}.")


def check_finetune(s: FinetuneSettings, objective: Callable[[FinetuneSettings], None]) -> None:
    """What ``zoo train`` checks, the objective's own refusals (``objective(s)``: its settings
    and data, each source read up to its first record), and the export target (refused now,
    not after training)."""
    from .._export_directory import check_export_target

    if s.model != RunSettings.model:
        raise finetune_model_error()
    check_run(s)
    if s.objective not in OBJECTIVES:
        raise objective_error(s.objective)
    objective(s)
    if s.export_hf is None:
        return
    if pathlib.Path(s.export_hf).resolve() == pathlib.Path(s.out).resolve():
        raise UsageError("--export-hf cannot be the run's own --out directory; choose another.")
    # The run's own earlier export is replaced without --overwrite.
    own = is_own_export(pathlib.Path(s.out), s.export_hf)
    sources = (s.from_hf, s.from_run)
    check_export_target(
        s.export_hf,
        sources=sources,
        overwrite=s.overwrite or own,
        named="--export-hf",
        inputs=tuple(i for i in run_inputs(s) if i not in sources),
    )


def check_data_kind(s: FinetuneSettings, *, pairs: bool) -> None:
    """Every ``--data`` and ``--eval-data`` source holds preference pairs (``pairs``), or none
    does; each read up to its first record."""
    from zoo_data import holds_pairs

    if pairs and not s.data:
        raise UsageError(
            f"--objective {s.objective} trains on preference pairs; pass them with --data (JSON "
            "lines with `prompt`, `chosen` and `rejected`, or a token store of them)."
        )
    for path in [*s.data, *s.eval_data]:
        try:
            held = holds_pairs(path)
        except ValueError as e:
            raise UsageError.from_error(e) from None
        if pairs and not held:
            raise UsageError(
                f"--objective {s.objective} trains on preference pairs, but {path!r} holds plain "
                "text or examples; pass JSON lines with `prompt`, `chosen` and `rejected` (or a "
                "token store of them)."
            )
        if not pairs and held:
            raise UsageError(
                f"{path!r} holds preference pairs; pass --objective dpo, ipo, simpo or orpo to "
                "tune on them."
            )


# --- A finished run, found before anything is built ---------------------------------------------


def _compared(s: RunSettings, values: dict[str, Any]) -> dict[str, Any]:
    """The settings of a record that make the run what it is, by their declarations (with
    ``epochs`` the steps follow from them, and are not compared either)."""
    kept = compared(s, values)
    if s.epochs is not None:
        kept.pop("steps", None)
    return kept


def _last_settings(out: pathlib.Path) -> dict[str, Any] | None:
    """The settings recorded by the run's last start (or resume) record."""
    from ..loop import METRICS_FILE, read_metrics

    starts = [r for r in read_metrics(out / METRICS_FILE) if r.get("event") in ("start", "resume")]
    settings = starts[-1].get("settings") if starts else None
    return settings if isinstance(settings, dict) else None


def complete_step(s: RunSettings) -> int | None:
    """The step at which the run in ``s.out`` is complete, when it is and ``s`` asks it for no
    more (the same settings and steps, no export it lacks); else ``None`` (train as usual)."""
    from .._run_directory import checkpoint_steps, read_metas

    out = pathlib.Path(s.out)
    committed = checkpoint_steps(out)
    saved = _last_settings(out)
    if not committed or saved is None:
        return None
    step = committed[-1]
    epochs = s.epochs is not None
    if saved.get("steps") != step or (not epochs and s.steps != step):
        return None
    now = json.loads(json.dumps(flat(s), default=str))  # as the record holds it
    if _compared(s, now) != _compared(s, saved):
        return None
    export = getattr(s, "export_hf", None)
    if export is not None:  # only when that export already holds the last step
        record = read_export(out)
        if record is None or record.step != step or record.path != pathlib.Path(export).resolve():
            return None
        if not (record.path / "config.json").is_file():
            return None
    metas = read_metas(out)  # the newest checkpoint must be readable to be the run's end
    identity = (metas.get(step) or {}).get("identity") or {}
    if (identity.get("config") or {}).get("steps") != step:
        return None
    return step


def already_complete(s: RunSettings) -> bool:
    """Whether the run in ``s.out`` is complete and ``s`` asks it for no more
    (:func:`complete_step`): then it says so, and the recipe loads nothing and leaves every
    file of the run as it was."""
    step = complete_step(s)
    if step is None:
        return False
    say(
        f"zoo: the run in {s.out} was already complete at step {step}; nothing to train (raise "
        f"--{'epochs' if s.epochs is not None else 'steps'} to extend it)."
    )
    return True


# --- The output directory -----------------------------------------------------------------------


def run_started(out: pathlib.Path) -> bool:
    """Whether a run in ``out`` got as far as training (its start record is written) or has
    checkpoints: a run that failed before then leaves nothing of value behind."""
    from .._run_directory import checkpoint_steps
    from ..loop import METRICS_FILE

    return (out / METRICS_FILE).exists() or bool(checkpoint_steps(out))


@contextlib.contextmanager
def output_directory(out: pathlib.Path) -> Iterator[None]:
    """Hold ``out``'s run lock (process 0) for the block. If the block fails before the run
    wrote any metrics or checkpoint (a refused command: bad data, a template error, a mesh
    that does not fit), what it added to ``out`` is removed again, and so are the lock file
    and the directories taking the lock created: a refusal leaves nothing behind."""
    with run_lock(out, enabled=is_primary(), started=run_started):
        yield


def saved_provenance(out: pathlib.Path) -> dict[int, dict[str, Any] | None]:
    """The provenance recorded in each readable checkpoint of ``out`` (empty: a new run)."""
    from .._run_directory import read_metas

    return {step: meta.get("provenance") for step, meta in read_metas(out).items()}


# --- The mesh -----------------------------------------------------------------------------------

#: What to lower when a step's batch does not fit.
LOWER_BATCH = "lower --batch-size, --grad-accum or --seq-len"


def batch_width(s: FinetuneSettings) -> tuple[int, str]:
    """Tokens in a row of a step's batch (a prompt and its completion for GRPO), and what
    to lower when the batch does not fit."""
    if s.objective == "grpo":
        width = s.grpo.max_prompt_length + s.grpo.max_completion_length - 1
        return width, "lower --batch-size, --grad-accum or the prompt and completion lengths"
    return s.seq_len, LOWER_BATCH


def mesh_and_rules(
    text: str | None,
    sharding: Mapping[str, Any] | None = None,
    *,
    devices: Sequence[Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """``(mesh, rules)`` for ``--mesh TEXT`` (``None``: the default mesh) and ``[sharding]``.

    Raises:
        UsageError: a malformed mesh, one that does not match the device count, or a rule that
            names an unknown mesh axis.
    """
    from ..parallel import MeshConfig, make_mesh, make_rules

    try:
        config = MeshConfig() if text is None else MeshConfig.parse(text)
        return make_mesh(config, devices), make_rules(sharding)
    except ValueError as e:
        raise UsageError.from_error(e) from None


def check_mesh_fits(
    mesh: Any,
    rules: Mapping[str, Any],
    model_config: Any,
    *,
    batch_size: int | None = None,
    seq_len: int | None = None,
) -> None:
    """A batch the data axes cannot split, a sequence the context axes cannot, a model's heads
    the tensor axes cannot, or its experts the expert axes cannot, as a usage error
    (``batch_size=None``, ``seq_len=None``: not checked)."""
    from ..parallel import check_batch, check_experts, check_heads, check_recurrent, check_sequence

    try:
        if batch_size is not None:
            check_batch(batch_size, mesh, rules)
        if seq_len is not None:
            check_sequence(seq_len, mesh, rules)
        check_heads(model_config.n_heads, model_config.kv_heads, mesh, rules)
        check_experts(getattr(model_config, "n_experts", 0), mesh, rules)
        check_recurrent(getattr(model_config, "n_linear_layers", 0), mesh, rules)
    except ValueError as e:
        raise UsageError.from_error(e) from None


def check_positions(model_config: Any, seq_len: int) -> None:
    """Rows longer than a learned position table (GPT-2) as a usage error: the lookups past
    its end would be clamped into garbage (a ``nan`` loss), not refused."""
    if model_config.positional == "learned" and seq_len > model_config.max_position:
        raise UsageError(
            f"seq_len {seq_len} exceeds the model's {model_config.max_position} positions; "
            "lower --seq-len or raise model_config.max_position."
        )


def check_train_positions(model_config: Any, seq_len: int, *, settable: bool) -> None:
    """Training rows longer than the model's positions as a usage error, whatever its position
    encoding: a rotary model trained past ``max_position`` records a context it was never given,
    and generation from the run stops at it. ``settable``: the run may raise the limit with
    ``model_config.max_position`` (a preset, or a rotary Hugging Face model), which the run and
    its exports then record."""
    limit = model_config.max_position
    if seq_len <= limit:
        return
    fix = (
        f"lower --seq-len or raise the limit with --set model_config.max_position={seq_len}"
        if settable
        else "lower --seq-len"
    )
    raise UsageError(f"--seq-len {seq_len} is longer than the model's {limit} positions; {fix}.")


# --- The model ----------------------------------------------------------------------------------


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
        name: the model as the user named it: the preset, or the checkpoint it came from.
    """

    model: Any
    config: Any
    tokenizer: Any
    init: dict[str, Any]
    provenance: dict[str, Any] | None = None
    name: str = ""


def check_model_changes(changes: dict[str, Any]) -> None:
    """Refuse ``model_config`` keys that are no field of ``zoo_models.ModelConfig``."""
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


def store_tokenizer_dir(data: list[str]) -> tuple[pathlib.Path, str] | None:
    """``(directory, description)`` of the tokenizer the prepared stores ``data`` were made
    with and hold a copy of, when every source is such a store and all share one tokenizer
    (``None`` otherwise: raw data, the byte tokenizer, or stores that disagree)."""
    from zoo_data import is_store

    if not data or not all(is_store(p) for p in data):
        return None
    identities = []
    for p in data:
        try:
            identity = json.loads((pathlib.Path(p) / "manifest.json").read_text())["tokenizer"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        identities.append(identity)
    directory = pathlib.Path(data[0]) / "tokenizer"
    if (
        identities[0].get("kind") == "bytes"
        or len({i.get("fingerprint") for i in identities}) != 1
        or not (directory / "tokenizer.json").is_file()
    ):
        return None
    return directory, str(identities[0].get("description", "its tokenizer"))


def run_tokenizer(s: RunSettings, out: pathlib.Path) -> Any:
    """The tokenizer ``zoo train`` trains with: ``--tokenizer`` (its files copied into the run,
    so it travels into generate, eval and exports); else, when the data are prepared stores of
    one tokenizer, the copy of it they hold (said in one line); else the byte tokenizer."""
    import zoo_models
    from zoo_data import byte_tokenizer

    from .._run_directory import TOKENIZER_DIR, copy_tokenizer_files

    if s.tokenizer is None:
        stored = store_tokenizer_dir(list(s.data))
        if stored is None:
            return byte_tokenizer()
        source, made_with = stored
        say(
            f"zoo: tokenizer: the store's own ({made_with}, copied in {source}); "
            "--tokenizer names another"
        )
    else:
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
    return Model(build, config, tokenizer, init, name=s.model)


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
    name = f"{model.config.family} model from {s.from_hf}"
    return Model(model, model.config, tokenizer, init, name=name)


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
    name = f"{model.config.family} model from {s.from_run}"
    return Model(
        model, model.config, loaded.tokenizer, init, loaded.meta.get("provenance"), name=name
    )


def finetune_source(
    s: FinetuneSettings, out: pathlib.Path, mesh: Any, rules: Any, *, seq_len: int | None = None
) -> tuple[Model, LoRAConfig | None]:
    """The model to fine-tune (:func:`source_model`) checked against the mesh and its rows of
    ``seq_len`` tokens (``None``: not checked here), and its LoRA adapters
    (:func:`lora_config`; ``None``: every weight trains)."""
    from .._capacity import check_batch_fits

    model = source_model(s, out, mesh, rules)
    check_mesh_fits(mesh, rules, model.config, batch_size=s.batch_size, seq_len=s.seq_len)
    check_batch_fits(s.batch_size * s.grad_accum, *batch_width(s))
    lora = lora_config(s, model)
    if seq_len is not None:
        # A rotary Hugging Face model takes a longer context from model_config; a zoo run's
        # model is what it was trained as.
        settable = s.from_hf is not None and model.config.positional == "rope"
        check_train_positions(model.config, seq_len, settable=settable)
    return model, lora


def stop_tokens(s: RunSettings, tokenizer: Any) -> tuple[int, ...]:
    """Where generation stops for a model of ``tokenizer``: the source checkpoint's generation
    settings, else the tokenizer's EOS."""
    import zoo_models

    from .._run_directory import read_generation

    source = getattr(s, "from_hf", None) or getattr(s, "from_run", None)
    generation = read_generation(source) if source else {}
    return tuple(zoo_models.stop_token_ids(generation, tokenizer))


# --- LoRA ---------------------------------------------------------------------------------------


def lora_config(s: FinetuneSettings, model: Model) -> LoRAConfig | None:
    """The adapters' settings (``None``: full fine-tuning); an adapter continued is recorded in
    ``model.init``."""
    if s.lora.from_ is not None:
        lora = _adapter_settings(s)
        model.init["adapter"] = str(pathlib.Path(s.lora.from_).resolve())
        return lora
    return lora_settings(s, model.config)


def lora_settings(s: FinetuneSettings, config: object) -> LoRAConfig | None:
    """The adapters of ``--lora-rank`` and ``--lora-targets`` (default: the family's) on a
    model of ``config``, or those of the adapter ``--lora-from`` continues; ``None``: full
    fine-tuning."""
    import zoo_models

    if s.lora.from_ is not None:
        return _adapter_settings(s)
    if s.lora.rank == 0:
        return None
    try:
        targets = tuple(t for item in s.lora.targets for t in item.split(",") if t)
        targets = targets or zoo_models.default_lora_targets(config)  # type: ignore[arg-type]
        return LoRAConfig(rank=s.lora.rank, alpha=s.lora.alpha, targets=targets)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _adapter_settings(s: FinetuneSettings) -> LoRAConfig:
    """The LoRA settings of the PEFT adapter ``--lora-from`` continues; a different
    ``--lora-rank`` is refused."""
    try:
        lora = read_peft_config(s.lora.from_)  # type: ignore[arg-type]
    except ValueError as e:
        raise UsageError(str(e)) from None
    if s.lora.rank not in (0, lora.rank):
        raise UsageError(
            f"The adapter in {s.lora.from_!r} has rank {lora.rank}, not {s.lora.rank}; "
            "drop --lora-rank (the adapter's own settings are used)."
        )
    return lora


def reference_weights(s: FinetuneSettings, model: Model, lora: LoRAConfig | None) -> Any:
    """The starting weights of a fine-tune (with the adapter ``--lora-from`` continues merged
    in), built when a resumed run holds only their builder: what a frozen reference (DPO's,
    GRPO's) computes with."""
    from .._state_plan import is_builder

    base = model.model() if is_builder(model.model) else model.model
    if lora is None or s.lora.from_ is None:
        return base
    import jax

    from ..peft import apply_lora, load_adapters, merge_lora

    adapted = apply_lora(base, lora, key=jax.random.key(s.seed))
    return merge_lora(load_adapters(adapted, s.lora.from_))


# --- Data ---------------------------------------------------------------------------------------


@dataclasses.dataclass
class Data:
    """A run's training rows, its held-out rows by source (``None``: none), and a description
    for the start line (``headline``: what the steps are, when not rows of tokens)."""

    train: Any
    val: Mapping[str, Any] | None
    described: str
    headline: str | None = None
    closers: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def __enter__(self) -> Data:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close every store's files, and whatever else the data holds open (``closers``)."""
        close = getattr(self.train, "close", None)
        if close is not None:
            close()
        for part in (self.val or {}).values():
            part.close()
        for closer in self.closers:
            closer()

    @property
    def tokens_per_epoch(self) -> int:
        """Training tokens in one pass over every source."""
        return sum(self.train.rows_per_epoch) * self.train.seq_len


def _unique(names: list[str]) -> list[str]:
    """``names`` with repeats numbered (``data``, ``data-2``): the sources' names in metrics."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def _describe(
    sources: list[tuple[str, pathlib.Path]], stores: list[Any], cache: pathlib.Path
) -> str:
    """Each source with its documents and what of it is held out, e.g. ``corpus/ (120
    documents; held out: 6, 4.8% of the tokens)``: raw data by the paths the user gave, not
    by its store in the data ``cache``."""
    parts = []
    for (name, path), store in zip(sources, stores, strict=True):
        train, held = store.manifest["splits"]["train"], store.manifest["splits"]["eval"]
        docs = train["documents"] + held["documents"]
        what = str(path)
        if name == "stdlib":
            what = "the Python standard library"
        elif path.absolute().parent == cache.absolute():
            what = ", ".join(source["source"] for source in store.manifest["sources"])
        share = held["tokens"] / max(train["tokens"] + held["tokens"], 1)
        out = (
            f"held out: {held['documents']:,}, {share:.1%} of the tokens"
            if held["tokens"]
            else "none held out"
        )
        parts.append(f"{what} ({docs:,} document{'s' if docs != 1 else ''}; {out})")
    return ", ".join(parts)


def say_chat_format(s: RunSettings, tokenizer: Any) -> None:
    """One line when raw data hold conversations and the tokenizer has no chat template: they
    are rendered in the plain ``role: content`` format, and how to give a template."""
    from zoo_data import is_store
    from zoo_data.inputs import raw_holds_conversations

    if getattr(tokenizer, "chat_template", None) or not is_primary():
        return
    raw = [p for p in [*s.data, *s.eval_data] if not is_store(p)]
    try:
        chat = any(raw_holds_conversations(p) for p in raw)
    except ValueError:  # a missing source: refused where it is opened
        return
    if chat:
        print(
            "zoo: the tokenizer has no chat template, so conversations are rendered as "
            "`role: content` lines (exports carry that template); to use another, put it in "
            "the tokenizer's directory as chat_template.jinja or pass --tokenizer DIR with one",
            file=sys.stderr,
        )


def build_data(s: RunSettings, tokenizer: Any) -> Data:
    """The training and held-out rows of the settings' data (``data``, ``data_weights``,
    ``eval_data``, the split), every source a token store made with ``tokenizer``.

    Raises:
        UsageError: a store of another tokenizer, too little data for one row, bad weights.
    """
    from zoo_data import HeldOut, StoreLoader, TokenStore

    say_chat_format(s, tokenizer)
    sources = training_stores(s, tokenizer)
    val: dict[str, HeldOut] | None
    try:
        stores = [TokenStore(path, tokenizer=tokenizer) for _, path in sources]
        # Without weights, each source in proportion to its size: as if they were one corpus.
        weights = s.data_weights or [max(st.split("train").num_tokens, 1) for st in stores]
        train = StoreLoader(
            stores,
            seq_len=s.seq_len,
            weights=weights,
            seed=s.seed,
            tokenizer=tokenizer,
            names=_unique([name for name, _ in sources]),
        )
        described = _describe(sources, stores, data_cache(s))
        if s.eval_data:
            held = eval_stores(s, tokenizer)
            val = {
                name: HeldOut(
                    TokenStore(path, tokenizer=tokenizer), s.seq_len, splits=("train", "eval")
                )
                for name, path in zip(
                    _unique([n for n, _ in held]), [p for _, p in held], strict=True
                )
            }
            described += f", evaluated on {', '.join(s.eval_data)}"
        else:
            val = train.held_out()
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if not val:
        val = None
        if (s.val_fraction > 0 or s.eval_data) and is_primary():
            print(
                "zoo: too little held-out text for evaluation; training without it.",
                file=sys.stderr,
            )
    return Data(train, val, described)


def eval_sources(
    paths: list[str],
    tokenizer: Any,
    *,
    cache: pathlib.Path,
    seq_len: int,
    text_field: str,
    max_bytes: int,
    seed: int,
    val_fraction: float | None,
) -> tuple[dict[str, Any], str]:
    """What ``zoo eval`` evaluates, by source, and its description: ``paths`` whole (stores as
    they are, raw data prepared into ``cache``), or only their held-out split with
    ``val_fraction``; without ``paths``, the held-out split of the standard library corpus
    that ``zoo train`` evaluates on.

    Raises:
        UsageError: a held-out split too small to evaluate.
    """
    from zoo_data import HeldOut, TokenStore, is_store, stdlib_files

    from ._stores import prepared

    whole = bool(paths) and val_fraction is None
    fraction = 0.0 if whole else (0.05 if val_fraction is None else val_fraction)
    prepare = {
        "tokenizer": tokenizer,
        "cache": cache,
        "text_field": text_field,
        "eval_fraction": fraction,
        "progress": False,
    }
    if paths:
        named = [
            (name, pathlib.Path(p) if is_store(p) else prepared([p], name=name, **prepare))
            for name, p in zip(_unique([slug(p) for p in paths]), paths, strict=True)
        ]
        described = ", ".join(paths)
    else:
        files = [str(f) for f in stdlib_files(max_bytes=max_bytes, seed=seed)]
        named = [("stdlib", prepared(files, name="stdlib", **prepare))]
        described = f"the Python standard library ({len(files)} files)"
    splits = ("train", "eval") if whole else ("eval",)
    try:
        sources = {
            name: HeldOut(TokenStore(path, tokenizer=tokenizer), seq_len, splits=splits)
            for name, path in named
        }
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if not any(part.rows for part in sources.values()):
        raise UsageError(
            "The held-out split is too small to evaluate; pass --data or raise --val-fraction."
        )
    return sources, described


#: More passes than this over the training data draw a warning.
MANY_EPOCHS = 4.0


def epochs_as_steps(s: _S, train: Any) -> _S:
    """``s`` with ``steps`` set from ``epochs`` (when given): the whole steps whose rows come
    nearest to ``epochs`` passes over the training data (at least one). Where that is not
    exactly ``epochs`` passes (a batch larger than the data, or rows that do not divide), the
    start line says so: :func:`_epochs_warning`."""
    from ..loop import rows_per_epoch

    if s.epochs is None:
        return s
    if s.epochs <= 0:
        raise UsageError(f"--epochs must be positive, got {s.epochs:g}.")
    rows = rows_per_epoch(train)
    if rows is None:
        raise UsageError("--epochs needs data whose size is known; pass --steps instead.")
    # Nearest, not rounded up: 3 epochs of 6 rows at 16 rows a step is 1 step (2.7 passes), not 2
    # (5.3 passes).
    steps = max(1, round(s.epochs * rows / (s.batch_size * s.grad_accum)))
    if steps > MAX_STEPS:
        raise UsageError(
            f"--epochs {s.epochs:g} makes {steps:,} steps, more than a run may take "
            f"({MAX_STEPS:,}); lower --epochs."
        )
    return dataclasses.replace(s, steps=steps)


def _epochs(s: RunSettings, train: Any) -> float | None:
    """The passes ``s.steps`` steps make over the training data (``None``: size unknown)."""
    from ..loop import rows_per_epoch

    rows = rows_per_epoch(train)
    return None if rows is None else s.steps * s.batch_size * s.grad_accum / rows


def _epochs_phrase(s: RunSettings, train: Any) -> str:
    """``" (0.55 epochs)"`` for the start line ("" when the size is unknown)."""
    from ..loop import epochs_text

    passes = _epochs(s, train)
    if passes is None:
        return ""
    return f" ({epochs_text(passes)} epoch{'' if passes == 1 else 's'})"


def _exact_batch(rows: int, epochs: float, largest: int) -> int | None:
    """The largest batch of at most ``largest`` rows whose whole steps make exactly ``epochs``
    passes over ``rows`` rows, or ``None``."""
    total = epochs * rows
    if total != int(total):
        return None
    return next((b for b in range(min(largest, int(total)), 0, -1) if int(total) % b == 0), None)


def _epochs_warning(s: RunSettings, train: Any) -> str | None:
    """What the start line adds about the passes over the data, or ``None``: with
    ``--epochs``, where the whole steps do not make exactly that many passes (how many they
    make, and the batch size that would); with ``--steps``, a run of more than
    :data:`MANY_EPOCHS` passes."""
    from ..loop import epochs_text, rows_per_epoch

    passes = _epochs(s, train)
    rows = rows_per_epoch(train)
    if passes is None or rows is None:
        return None
    if s.epochs is not None:
        if math.isclose(passes, s.epochs, rel_tol=1e-6):
            return None
        per_step = s.batch_size * s.grad_accum
        step_word = "step makes" if s.steps == 1 else "steps make"
        batch = _exact_batch(rows, s.epochs, per_step if per_step < rows else rows)
        exact = (
            f"; --batch-size {batch // s.grad_accum} makes exactly {s.epochs:g}"
            if batch is not None and batch % s.grad_accum == 0
            else ""
        )
        return (
            f"zoo: note: --epochs {s.epochs:g} over {rows:,} rows of {s.seq_len} tokens at "
            f"{per_step} rows a step: {s.steps} {step_word} {epochs_text(passes)} epochs, the "
            f"nearest that whole steps come{exact}."
        )
    if passes <= MANY_EPOCHS:
        return None
    return (
        f"zoo: warning: {s.steps} steps of {s.batch_size * s.grad_accum} rows pass over the "
        f"training data ({rows:,} rows of {s.seq_len} tokens) {epochs_text(passes)} times, so "
        "the model may learn it by heart; pass --epochs N (e.g. 3) instead of --steps, or add "
        "data."
    )


# --- The trainer --------------------------------------------------------------------------------


def run_info(
    model: Model,
    *,
    preset: str | None = None,
    lora: LoRAConfig | None = None,
    objective: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a run records about its model, compared when it resumes: the ``preset`` it was
    built from (``zoo train``), its config, tokenizer and how it was obtained, its LoRA
    adapters, and the ``objective`` when it is not next-token prediction."""
    from .._run_directory import model_identity, tokenizer_spec

    info = {
        "model": preset,
        "model_config": model_identity(model.config),
        "tokenizer": tokenizer_spec(model.tokenizer),
        "init": model.init,
    }
    if objective is not None:
        info["objective"] = dict(objective)
    if lora is not None:
        info["lora"] = lora.to_dict()
    return info


def harness_hook(
    settings: EvalHarnessSettings, tokenizer: Any, *, steps: int, stop_tokens: tuple[int, ...]
) -> Any:
    """The hook running the benchmark tasks of ``--eval-harness`` on the model being trained
    (``None`` without it), checked before the run starts: lm-eval installed and every task
    found.

    Raises:
        UsageError: an ``--eval-harness-*`` flag without ``--eval-harness``, lm-eval missing,
            or a task that is not found.
    """
    if settings.tasks is None:
        changed = [
            f.name
            for f in dataclasses.fields(settings)
            if getattr(settings, f.name) != f.default and f.name != "tasks"
        ]
        if changed:
            flag = "--eval-harness-" + changed[0].replace("_", "-")
            raise UsageError(f"{flag} goes with --eval-harness T1,T2; add it or drop {flag}.")
        return None
    from ..eval_harness import require_lm_eval

    require_lm_eval()
    from ..eval_harness import HarnessHook, find_tasks

    tasks = [t.strip() for t in settings.tasks.split(",") if t.strip()]
    if not tasks:
        raise UsageError("--eval-harness names no task; pass e.g. --eval-harness arc_easy.")
    manager = find_tasks(tasks, settings.include_path)
    unknown = [t for t in tasks if not manager.match_tasks([t])]
    if unknown:
        raise UsageError(
            f"--eval-harness: no task named {unknown[0]!r}; check the name, or pass "
            "--eval-harness-include-path DIR holding its YAML."
        )
    return HarnessHook(
        tasks,
        tokenizer,
        steps=steps,
        every=settings.every,
        at_start=settings.at_start,
        include_path=settings.include_path,
        limit=settings.limit,
        batch_size=settings.batch_size,
        stop_tokens=stop_tokens,
    )


def adapted(s: FinetuneSettings, model: Model, lora: LoRAConfig | None) -> tuple[Any, Any]:
    """``(weights, trainable)`` of a fine-tune of ``model``: its weights and ``None`` (every
    floating-point weight trains), or with LoRA adapters added (seeded by ``s.seed``, their
    values from ``--lora-from`` when given) and the filter that trains them alone."""
    import jax

    if lora is None:
        return model.model, None
    key = jax.random.key(s.seed)
    return add_adapters(model.model, lora, key=key, adapter_from=s.lora.from_)


def finetune_trainer(
    s: FinetuneSettings,
    model: Model,
    lora: LoRAConfig | None,
    loss_fn: Any,
    mesh: Any,
    *,
    objective: Mapping[str, Any] | None = None,
) -> Trainer:
    """The trainer of a fine-tune of ``model`` with ``loss_fn`` (``None``: the next-token loss)
    into ``s.out``: every floating-point weight trained, or LoRA adapters alone
    (:func:`adapted`), which the :class:`~zoo_train.peft.SaveAdapters` hook writes to
    ``OUT/adapter`` after the last step."""
    out = pathlib.Path(s.out)
    weights, trainable = adapted(s, model, lora)
    info = run_info(model, lora=lora, objective=objective)
    config = s.train_config()
    trainer = Trainer(config, weights, loss_fn, out, mesh=mesh, trainable=trainable, run_info=info)
    if lora is not None:
        saving = SaveAdapters(
            lora, out / ADAPTER_DIR, model_config=info["model_config"], init=info["init"]
        )
        trainer.add_hook(saving, every=0)
    return trainer


def train_and_report(
    trainer: Trainer,
    s: RunSettings,
    command: str,
    model: Model,
    data: Data,
    lora: LoRAConfig | None,
    saved: Mapping[int, dict[str, Any] | None],
    trackers: Trackers,
) -> TrainResult:
    """Train, saying what starts (unless it resumes), what it trains, what changed since the
    checkpoint it resumes (or, fine-tuning a zoo run, since its source checkpoint), and a
    summary at the end; the run's records go to ``trackers``, then its loss curve. The
    benchmark tasks of ``--eval-harness`` are a hook of the trainer's, checked first."""
    from .._parameters import describe_parameters, parameter_summary
    from ..loop import PLOT_FILE
    from ..parallel import describe_mesh

    config, out = trainer.config, pathlib.Path(s.out)
    mesh_line = f"on mesh {describe_mesh(trainer.mesh)} -> {out}"
    if not saved and data.headline is not None:
        say(f"zoo: {command} {model.name} on {data.described}: {data.headline} {mesh_line}")
    elif not saved:
        say(
            f"zoo: {command} {model.name} on {data.described}: "
            f"{data.tokens_per_epoch:,} training tokens, {config.steps} steps of "
            f"{config.batch_size * config.grad_accum} x {s.seq_len} tokens"
            f"{_epochs_phrase(s, data.train)} {mesh_line}"
        )
        warning = _epochs_warning(s, data.train)
        if warning is not None:
            say(warning)
    parameters = parameter_summary(model.model, model.config, lora, model.init.get("dtype"))
    say("zoo: " + describe_parameters(parameters, s.compute_dtype, trainer.mesh))
    started = time.perf_counter()
    before = _last_settings(pathlib.Path(s.out)) if saved else None
    changes = _provenance_reporter(s, model, saved, before)

    def on_record(rec: dict[str, Any]) -> None:
        changes(rec)
        trackers.record(rec)

    harness = harness_hook(
        s.eval_harness,
        model.tokenizer,
        steps=config.steps,
        stop_tokens=stop_tokens(s, model.tokenizer),
    )
    if harness is not None:
        trainer.add_hook(harness)
    try:
        result = trainer.train(
            data.train,
            data.val,
            stop_at=s.stop_at,
            on_record=on_record,
            start_info={"parameters": parameters, "settings": flat(s)},
        )
    except CheckpointMismatchError:
        # Named by the settings the user gave, not the identity's internal keys.
        changed = identity_setting_changes(_last_settings(out), flat(s))
        if not changed:
            raise
        shown = "; ".join(changed[:4]) + ("; …" if len(changed) > 4 else "")
        raise CheckpointMismatchError(
            f"The checkpoints in {out} come from a different run ({shown}); "
            "resume with the same settings or choose a new output directory."
        ) from None
    if (out / PLOT_FILE).is_file():
        trackers.image("loss_curve", out / PLOT_FILE, result.step)
    if not trained(result):
        say(
            f"zoo: the run in {out} was already complete at step {result.step}; nothing to "
            "train (raise --steps to extend it)."
        )
    elif is_primary():
        _summary(out, time.perf_counter() - started, result.start_step, result.step)
    return result


def trained(result: TrainResult) -> bool:
    """Whether this call of the trainer took any step (a complete run resumed takes none)."""
    return result.step > result.start_step


#: Settings outside a run's identity that a resumed run may change, said when it does (the
#: reward functions and how GRPO samples: what it trains on from then on).
SAID_WHEN_CHANGED = ("grpo.",)


#: Settings a resumed run may change without becoming another run (how it runs, reports and
#: where it stops), left out when a refused resume names what changed.
RESUMABLE_SETTINGS = (
    "steps", "epochs", "stop_at", "out", "overwrite", "progress", "log_every", "eval_every",
    "eval_batches", "keep", "save_every", "trackers", "profile", "export_hf", "sample_tokens",
    "temperature", "prompt", "data_cache", "mesh.", "wandb.", "attention.", *SAID_WHEN_CHANGED,
)  # fmt: skip


def _changes(before: dict[str, Any], now: dict[str, Any], keys: list[str]) -> list[str]:
    def shown(value: Any) -> str:
        return " ".join(map(str, value)) if isinstance(value, list) else str(value)

    return [
        f"{k}: {shown(before.get(k))} -> {shown(now.get(k))}"
        for k in sorted(keys)
        if before.get(k) != now.get(k)
    ]


def setting_changes(before: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """``"grpo.reward: a.py:f -> b.py:g"`` for each setting of :data:`SAID_WHEN_CHANGED` that
    differs between ``before`` (``None``: nothing to compare) and ``now``."""
    if before is None:
        return []
    return _changes(before, now, [k for k in {*before, *now} if k.startswith(SAID_WHEN_CHANGED)])


def identity_setting_changes(before: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """``"data: a.store -> b.store"`` for each setting outside :data:`RESUMABLE_SETTINGS` that
    differs between the last start's ``before`` (``None``: none recorded) and ``now``."""
    if before is None:
        return []
    keys = [
        k
        for k in {*before, *now}
        if not any(k == r or (r.endswith(".") and k.startswith(r)) for r in RESUMABLE_SETTINGS)
    ]
    return _changes(before, now, keys)


def _provenance_reporter(
    s: RunSettings,
    model: Model,
    saved: Mapping[int, dict[str, Any] | None],
    settings_before: dict[str, Any] | None,
) -> Callable[[dict[str, Any]], None]:
    """A record watcher that says what changed since the checkpoint the run resumes (or, for a
    fine-tune of a zoo run, since its source checkpoint): kernels and versions, and the
    settings a resumed run may change (``settings_before``: those of its last start)."""
    from .._changes import provenance_changes

    def on_record(rec: dict[str, Any]) -> None:
        if rec.get("event") == "resume":
            step = rec.get("resumed_from")
            before = None if step is None else saved.get(step)
            what = f"checkpoint {step}"
            for line in setting_changes(settings_before, rec.get("settings") or {}):
                say(f"zoo: changed since {what}: {line}")
        elif rec.get("event") == "start":
            before = model.provenance
            what = f"the checkpoint in {getattr(s, 'from_run', None)}"
        else:
            return
        for line in provenance_changes(before, rec.get("provenance") or {}):
            say(f"zoo: changed since {what}: {line}")

    return on_record


def _summary(out: pathlib.Path, wall: float, start_step: int, end_step: int) -> None:
    from .._metrics_summary import curve_points, judged_by, trend_text
    from ..loop import CHECKPOINT_DIR, METRICS_FILE, PLOT_FILE, read_metrics

    # This call's records only: a resumed run's earlier steps are not its figures.
    records = [r for r in read_metrics(out / METRICS_FILE) if r.get("step", 0) > start_step]
    train = [r for r in records if isinstance(r.get("loss"), int | float)]
    evals = [r for r in records if isinstance(r.get("eval_loss"), int | float)]
    rates = [r["tokens_per_s"] for r in train if isinstance(r.get("tokens_per_s"), int | float)]
    parts = [f"steps {start_step} -> {end_step} in {wall:.1f} s"]
    if rates:
        parts.append(f"{sum(rates) / len(rates):,.0f} tokens/s")
    # What the objective is judged by: GRPO's reward and its parts, KL and completion length
    # (its loss is about 0 on-policy), a preference objective's loss, reward accuracy and margin.
    for key, label in judged_by(train):
        points = curve_points(train, key)
        fmt = ".1f" if key == "completions/mean_length" else ".3f"
        if len(points) > 1:
            parts.append(trend_text(points, label, fmt))
        elif points:  # one record (log_every >= the steps taken): no trend to show
            parts.append(f"{label} {points[0][1]:{fmt}} (steps {start_step + 1}-{end_step})")
    if evals and "eval_ppl" in evals[-1]:
        parts.append(f"eval loss {evals[-1]['eval_loss']:.3f} (ppl {evals[-1]['eval_ppl']:.2f})")
    elif evals and "eval_rewards/accuracies" in evals[-1]:
        points = [(int(r["step"]), float(r["eval_rewards/accuracies"])) for r in evals]
        accuracy = trend_text(points, "reward accuracy", ".3f")
        parts.append(f"eval loss {evals[-1]['eval_loss']:.3f}, {accuracy}")
    say("zoo: " + "; ".join(parts))
    say(
        f"zoo: checkpoints in {out / CHECKPOINT_DIR}, metrics in {out / METRICS_FILE}, "
        f"loss curve in {out / PLOT_FILE}"
    )


# --- After training: the export and the sample --------------------------------------------------

#: In the run directory: the last export's directory and the step it holds.
EXPORT_RECORD = "export.json"


@dataclasses.dataclass(frozen=True)
class ExportRecord:
    """The run's last export: its directory (absolute) and the step it holds."""

    path: pathlib.Path
    step: int


def read_export(out: pathlib.Path) -> ExportRecord | None:
    """The export recorded in the run directory ``out`` (``None``: none, or unreadable)."""
    try:
        data = json.loads((out / EXPORT_RECORD).read_text())
        return ExportRecord(pathlib.Path(data["path"]), int(data["step"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_export(out: pathlib.Path, target: str | pathlib.Path, step: int) -> None:
    """Record that ``target`` holds step ``step`` of the run in ``out``."""
    record = {"path": str(pathlib.Path(target).resolve()), "step": int(step)}
    (out / EXPORT_RECORD).write_text(json.dumps(record) + "\n")


def is_own_export(out: pathlib.Path, target: str | pathlib.Path) -> bool:
    """Whether ``target`` is where the run in ``out`` exported before (replacing it needs no
    ``--overwrite``)."""
    record = read_export(out)
    return record is not None and record.path == pathlib.Path(target).resolve()


def export(
    out: pathlib.Path,
    source: Model,
    weights: Any,
    target: str | pathlib.Path,
    generation: dict[str, Any],
    step: int,
) -> None:
    """Write ``weights`` (adapters merged) to ``target`` in the Hugging Face format, with the
    tokenizer of ``source``, in the dtype the source checkpoint came in, stopping where it
    stopped, and record in the run ``out`` that ``target`` holds ``step``. Every process
    gathers, process 0 writes, into a temporary sibling swapped in at the end."""
    from .._export_directory import atomic_directory
    from .._run_directory import TOKENIZER_DIR, export_tokenizer
    from ..peft import export_hf

    with atomic_directory(target, enabled=is_primary()) as directory:
        path = export_hf(weights, directory, dtype=source.init.get("dtype"), generation=generation)
        if is_primary():
            export_tokenizer(source.tokenizer, out / TOKENIZER_DIR, path)
    if is_primary():
        _write_export(out, target, step)
    say(f"zoo: exported the model at step {step} (adapters merged) to {pathlib.Path(target)}")


def _export_again(
    out: pathlib.Path, source: Model, weights: Any, generation: dict[str, Any], step: int
) -> None:
    """After an extension without ``--export-hf``: export again where the run exported before
    (named), when that export is older than ``step``; say so when it is gone."""
    record = read_export(out)
    if record is None or record.step == step:
        return
    if not (record.path / "config.json").is_file():
        say(
            f"zoo: the run's export in {record.path} (step {record.step}) is gone; pass "
            f"--export-hf DIR to export step {step}."
        )
        return
    say(f"zoo: {record.path} held step {record.step}; exporting step {step} there")
    export(out, source, weights, record.path, generation, step)


def sample(
    s: RunSettings,
    trainer: Trainer,
    tokenizer: Any,
    weights: Any,
    step: int,
    generation: dict[str, Any],
    trackers: Trackers,
) -> None:
    """Print up to ``sample_tokens`` tokens the trained model (``weights``, at ``step``) writes
    after the settings' prompt (nothing when 0), under a header with the number generated
    (fewer at a stop token or the model's positions), and send them to the trackers. Every
    process generates it (a sharded model); process 0 prints it."""
    if s.sample_tokens <= 0:
        return
    import zoo_models
    from zoo_data import leading_bos

    from .._inference import sample_ids
    from ..parallel import mesh_context

    # The sample stops at the model's positions without a warning (the default of 300 tokens
    # is more than llama-tiny's 128 positions hold): its header says how many it has.
    tokens = s.sample_tokens
    config = getattr(weights, "config", None)
    if config is not None:
        prompt = len(tokenizer.encode(s.prompt)) + (leading_bos(tokenizer) is not None)
        if config.max_position > prompt:
            tokens = min(tokens, config.max_position - prompt)
    with mesh_context(trainer.mesh, trainer.rules):
        ids = sample_ids(
            weights,
            tokenizer,
            s.prompt,
            max_new_tokens=tokens,
            temperature=s.temperature,
            seed=s.seed,
            stop_tokens=zoo_models.stop_token_ids(generation, tokenizer),
        )
    text = tokenizer.decode(ids)
    if is_primary():
        count = f"{len(ids)} token{'' if len(ids) == 1 else 's'}"
        print(f"--- sample ({count}, temperature {s.temperature}) ---")
        print(s.prompt + text)
    trackers.text("sample", s.prompt + text, step)


def finish_finetune(
    s: FinetuneSettings,
    trainer: Trainer,
    model: Model,
    lora: LoRAConfig | None,
    result: TrainResult,
    trackers: Trackers,
    *,
    part: Callable[[Any], Any] = lambda trained: trained,
) -> None:
    """After a fine-tune: where the adapters are, the model exported (to ``--export-hf``, or
    again where the run exported before), and the sample; of ``part(result.model)``, the
    fine-tuned model among what was trained (a distillation's student)."""
    from .._run_directory import read_generation

    out, weights = pathlib.Path(s.out), part(result.model)
    if lora is not None and trained(result):
        say(f"zoo: LoRA adapters (only) in {out / ADAPTER_DIR}")
    # Every process reads them alike: each one generates the final sample.
    generation = read_generation(s.from_hf or s.from_run)  # type: ignore[arg-type]
    if s.export_hf is not None:
        export(out, model, weights, s.export_hf, generation, result.step)
    elif trained(result):
        _export_again(out, model, weights, generation, result.step)
    if trained(result):
        sample(s, trainer, model.tokenizer, weights, result.step, generation, trackers)
