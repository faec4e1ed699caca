"""Run directories written by ``zoo train`` / ``zoo finetune``: what they record, and loading
their model back.

A run directory is the output of :func:`zoo_train.train` (``checkpoints/``, ``metrics.jsonl``,
``loss_curve.png``) whose ``run_info`` names the model (``model_config``), the tokenizer, how
the run started (``init``) and, for LoRA runs, the adapter settings; that is all it takes to
rebuild the ``TrainState`` template and restore the newest checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import shutil
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
from jax.sharding import Mesh

import zoo_models
from zoo_data.store import tokenizer_identity

from ._errors import NoUsableCheckpointError
from ._state_plan import plan_state
from ._usage import UsageError
from .checkpoint import CHECKPOINT_DIR, LOCK_FILE, Checkpointer
from .loop import METRICS_FILE
from .parallel import make_mesh, make_rules
from .peft import LoRAConfig, apply_lora, lora_filter
from .settings import TrainConfig

TOKENIZER_DIR = "tokenizer"
# The source checkpoint's generation settings (stop tokens above all), kept for exports and
# `zoo generate`; a file, not run_info, so that runs written before it still resume.
GENERATION_FILE = "generation_config.json"
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",  # where transformers' save_pretrained writes the chat template now
)
# How a model runs here, not what it computes: free to change between runs of one directory.
RUNTIME_FIELDS = ("attention_implementation", "remat", "scan_layers")


@dataclasses.dataclass
class LoadedRun:
    """A model restored from a run directory.

    Attributes:
        model: the model (with its LoRA adapters, if the run trained some).
        tokenizer: the run's tokenizer.
        step: the checkpoint step restored.
        meta: that checkpoint's metadata (``run_info``, ``provenance``, ``config``, ...).
        lora: the LoRA settings, or ``None`` for a plain model.
    """

    model: Any
    tokenizer: Any
    step: int
    meta: dict[str, Any]
    lora: LoRAConfig | None


def model_identity(config: Any) -> dict[str, Any]:
    """A ``ModelConfig`` as stored in ``run_info`` (runtime fields left out)."""
    return {k: v for k, v in config.to_dict().items() if k not in RUNTIME_FIELDS}


def tokenizer_spec(tokenizer: Any) -> dict[str, Any]:
    """How to rebuild ``tokenizer``: a byte tokenizer's specials, or the copied ``tokenizer/``."""
    if type(tokenizer).__name__ == "ByteTokenizer":
        return {
            "kind": "byte",
            "bos": tokenizer.bos_id is not None,
            "eos": tokenizer.eos_id is not None,
        }

    # The fingerprint names a change of tokenizer when a run resumes.
    fingerprint = tokenizer_identity(tokenizer, "")["fingerprint"]
    return {"kind": "hf", "dir": TOKENIZER_DIR, "fingerprint": fingerprint}


def tokenizer_files(source: pathlib.Path) -> list[pathlib.Path]:
    """The tokenizer files of a directory, or of the directory of a ``tokenizer.json`` file."""
    if source.is_file():
        return [source, *(source.parent / f for f in _TOKENIZER_FILES[1:])]
    return [source / f for f in _TOKENIZER_FILES if (source / f).is_file()]


def copy_tokenizer_files(source: pathlib.Path, target: pathlib.Path) -> None:
    """Copy the tokenizer files of ``source`` (a directory or a ``tokenizer.json``) into the
    directory ``target``."""
    files = [f for f in tokenizer_files(source) if f.is_file()]
    if not files:
        return
    target.mkdir(parents=True, exist_ok=True)
    for f in files:
        name = "tokenizer.json" if f == source else f.name
        shutil.copy2(f, target / name)


def export_tokenizer(tokenizer: Any, source: pathlib.Path, target: pathlib.Path) -> None:
    """Put the tokenizer beside exported weights in ``target``, where ``AutoTokenizer`` looks:
    the files it was read from (``source``), or the byte tokenizer written as a
    ``tokenizer.json``. A tokenizer without a chat template gets the plain format zoo renders
    conversations in (``zoo_data.PLAIN_CHAT_TEMPLATE``) as ``chat_template.jinja``, so the
    export's ``apply_chat_template`` renders what the model trained on."""
    from zoo_data import PLAIN_CHAT_TEMPLATE

    if tokenizer_files(source):
        copy_tokenizer_files(source, target)
    elif hasattr(tokenizer, "save"):
        tokenizer.save(target)
    if not getattr(tokenizer, "chat_template", None):
        target.mkdir(parents=True, exist_ok=True)
        (target / "chat_template.jinja").write_text(PLAIN_CHAT_TEMPLATE)


def write_generation(settings: Mapping[str, Any], run_dir: pathlib.Path) -> None:
    """Keep the source checkpoint's generation settings in ``run_dir`` (nothing when empty)."""
    if settings:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / GENERATION_FILE).write_text(json.dumps(dict(settings), indent=2) + "\n")


def read_generation(source: str | pathlib.Path) -> dict[str, Any]:
    """The generation settings of a Hugging Face directory (``generation_config.json``, else
    the special ids of ``config.json``) or of a run directory (those of the checkpoint it
    started from; ``{}`` for a run from scratch)."""
    # A run directory keeps them under the same name and has no config.json to fall back on.
    return zoo_models.read_generation_config(source)


def load_run_tokenizer(spec: dict[str, Any], run_dir: pathlib.Path) -> Any:
    """The tokenizer described by :func:`tokenizer_spec`."""
    if spec.get("kind") == "hf":
        return zoo_models.load_tokenizer(run_dir / spec.get("dir", TOKENIZER_DIR))
    return zoo_models.ByteTokenizer(bos=bool(spec.get("bos")), eos=bool(spec.get("eos", True)))


def checkpoint_steps(run_dir: str | pathlib.Path) -> list[int]:
    """Committed checkpoint steps of a run directory (empty when it has none)."""
    directory = pathlib.Path(run_dir) / CHECKPOINT_DIR
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit())


def no_model_error(path: str | pathlib.Path) -> UsageError:
    """Why ``path`` holds no model to load: it does not exist, it is a run that has not saved a
    checkpoint yet, or it is neither a run nor a Hugging Face directory."""
    p = pathlib.Path(path)
    if not p.exists():
        return UsageError(
            f"{str(path)!r} does not exist; pass a zoo run directory or a Hugging Face model "
            "directory."
        )
    if any((p / name).exists() for name in (LOCK_FILE, METRICS_FILE, CHECKPOINT_DIR)):
        return UsageError(
            f"{str(path)!r} is a zoo run with no checkpoint yet; let it train to its first save "
            "(every --save-every steps, and at the end) or pass a run that has one."
        )
    return UsageError(
        f"{str(path)!r} is neither a zoo run directory (with checkpoints/) nor a Hugging Face "
        "model directory (with config.json); pass one."
    )


def read_metas(run_dir: str | pathlib.Path) -> dict[int, dict[str, Any]]:
    """The metadata of every readable checkpoint of ``run_dir`` (``{}`` when there are none)."""
    if not checkpoint_steps(run_dir):
        return {}
    checkpointer = Checkpointer(pathlib.Path(run_dir) / CHECKPOINT_DIR, read_only=True)
    try:
        metas = {}
        for step in checkpointer.steps():
            try:
                metas[step] = checkpointer.read_meta(step)
            except Exception:  # an unreadable step is reported by the loop itself
                continue
        return metas
    finally:
        checkpointer.close()


def load_run(
    run_dir: str | pathlib.Path,
    *,
    attention_implementation: str | None = None,
    mesh: Mesh | None = None,
    rules: Mapping[str, Any] | None = None,
    step: int | None = None,
) -> LoadedRun:
    """Restore the newest readable checkpoint of a ``zoo train`` / ``zoo finetune`` run (or
    the checkpoint of ``step``).

    The checkpoint is read straight into its place on ``mesh`` (default: every device, fully
    sharded) through an abstract template: no model is built first, and the mesh it was saved
    on does not matter.

    Raises:
        UsageError: ``run_dir`` holds no checkpoints or was not written by the zoo CLI, or no
            checkpoint of ``step``.
        NoUsableCheckpointError: it has checkpoints but none can be read.
    """
    run_dir = pathlib.Path(run_dir)
    metas = read_metas(run_dir)
    steps = checkpoint_steps(run_dir)
    if not steps:
        raise no_model_error(run_dir)
    if not metas:
        raise NoUsableCheckpointError(
            f"None of the checkpoints in {run_dir / CHECKPOINT_DIR} (steps "
            f"{', '.join(map(str, steps))}) has readable metadata; move them away or pass "
            "another run."
        )
    if step is not None and step not in steps:
        raise UsageError(
            f"{str(run_dir)!r} has no checkpoint of step {step}; its checkpoints are of steps "
            f"{', '.join(map(str, steps))}."
        )
    meta = metas[max(metas)]
    info = meta.get("run_info") or {}
    if "model_config" not in info:
        raise UsageError(
            f"The checkpoints in {str(run_dir)!r} do not record a zoo model; pass a run "
            "directory written by zoo train or zoo finetune."
        )
    model_config = zoo_models.ModelConfig.from_dict(
        {**info["model_config"], "attention_implementation": attention_implementation}
    )
    config = TrainConfig.from_dict(meta["config"])
    lora = LoRAConfig(**info["lora"]) if info.get("lora") else None

    def build() -> Any:
        model = zoo_models.build(model_config, key=jax.random.key(0))
        return model if lora is None else apply_lora(model, lora, key=jax.random.key(0))

    abstract = eqx.filter_eval_shape(build)
    plan = plan_state(
        build,
        config,
        make_mesh() if mesh is None else mesh,
        make_rules(rules),
        trainable=None if lora is None else lora_filter(abstract),
        abstract_model=abstract,
    )
    checkpointer = Checkpointer(run_dir / CHECKPOINT_DIR, read_only=True)
    try:
        restored = (
            checkpointer.restore(plan.template)
            if step is None
            else checkpointer.restore_step(step, plan.template)
        )
    finally:
        checkpointer.close()
    if restored is None:  # pragma: no cover - read_metas found steps
        raise UsageError(f"{str(run_dir)!r} holds no readable checkpoints.")
    tokenizer = load_run_tokenizer(info.get("tokenizer") or {"kind": "byte"}, run_dir)
    return LoadedRun(
        model=restored.state.model,
        tokenizer=tokenizer,
        step=restored.step,
        meta=restored.meta,
        lora=lora,
    )
