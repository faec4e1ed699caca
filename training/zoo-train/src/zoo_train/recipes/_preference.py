"""The preference step of ``zoo finetune --objective dpo|ipo|simpo|orpo``: the loss, and where
its reference comes from (the base with the LoRA adapters off, or log-probabilities computed
once before training and kept in the run); the lines saying what was skipped and what packing
saved."""

from __future__ import annotations

import pathlib
import time
from typing import Any

from .._usage import UsageError
from ..peft import LoRAConfig
from ..settings import FinetuneSettings
from ._data import Data
from ._model import Model
from ._steps import say


def _pair_splits(data: Data) -> tuple[list[Any], list[Any]]:
    """``(splits, layouts)`` of every pair split the run reads: training, then held out."""
    splits, layouts = [], []
    for lay in data.train.layouts:
        splits.append(lay.split)
        layouts.append(lay)
    for part in (data.val or {}).values():
        for lay in part.layouts:
            splits.append(lay.split)
            layouts.append(lay)
    return splits, layouts


def _report_skips(data: Data, layouts: list[Any], seq_len: int) -> None:
    """A line per kind of pair left out: at prepare time (no preference) and here (too long)."""
    from zoo_data import skipped_sentence

    stores = [*data.train.stores, *(part.store for part in (data.val or {}).values())]
    seen: set[str] = set()
    for store in stores:
        if store.fingerprint in seen:
            continue
        seen.add(store.fingerprint)
        for reason, (count, first) in (store.manifest["skipped"].get("pairs") or {}).items():
            say(f"zoo: {skipped_sentence(reason, count, first)}.")
    long = [(lay.split, int(d)) for lay in layouts for d in lay.skipped]
    if long:
        split, doc = long[0]
        say(
            f"zoo: skipped {len(long)} pair{'s' if len(long) != 1 else ''} longer than a row of "
            f"--seq-len + 1 = {seq_len + 1} tokens (first: {split.origin(doc)}); raise --seq-len "
            "to train on them."
        )


def reference_weights(s: FinetuneSettings, model: Model, lora: LoRAConfig | None) -> Any:
    """The model the reference log-probabilities are computed with: the starting weights (with
    the adapter ``--lora-from`` continues merged in), built when a resumed run holds only
    their builder."""
    from .._plan import is_builder

    base = model.model() if is_builder(model.model) else model.model
    if lora is None or s.lora.from_ is None:
        return base
    import jax

    from ..peft import apply_lora, load_adapters, merge_lora

    adapted = apply_lora(base, lora, key=jax.random.key(s.seed))
    return merge_lora(load_adapters(adapted, s.lora.from_))


def objective_loss(
    s: FinetuneSettings, lora: LoRAConfig | None, mesh: Any
) -> tuple[Any, str] | None:
    """``(loss, described)`` of ``s.objective`` as ``zoo finetune`` trains it (``None`` for
    ``sft``, the loop's default loss): its reference the base with the LoRA adapters off, the
    batch's ``ref_logps`` (computed before training), or none. ``zoo compile`` compiles this
    loss; :func:`preference_loss` first makes the reference tables it reads.

    Raises:
        UsageError: a bad ``--beta``.
    """
    if s.objective == "sft":
        return None
    from .._precision import resolve_compute_dtype
    from ..parallel import platform_of
    from ..preference import PreferenceConfig, PreferenceLoss

    try:
        config = PreferenceConfig(s.objective, s.beta, s.simpo_gamma)
    except ValueError as e:
        raise UsageError.from_error(e) from None
    if not config.needs_reference:
        reference = None
    elif lora is not None and s.lora.from_ is None:
        reference = "adapters"
    else:
        reference = "batch"
    dtype = resolve_compute_dtype(s.compute_dtype, platform_of(mesh))
    described = f"{s.objective} (beta {config.beta:g}" + (
        f", gamma {config.simpo_gamma:g})" if s.objective == "simpo" else ")"
    )
    return PreferenceLoss(config, reference=reference, compute_dtype=dtype), described


def preference_loss(
    s: FinetuneSettings,
    model: Model,
    data: Data,
    lora: LoRAConfig | None,
    out: pathlib.Path,
    mesh: Any,
    rules: Any,
) -> Any:
    """The loss of ``s.objective`` (``None`` for ``sft``, the loop's default), its reference
    ready: with LoRA the adapters switched off; else (or continuing an adapter) the tables of
    ``OUT/reference``, read when the run kept them, computed now otherwise.

    Raises:
        UsageError: a bad ``--beta``, or no pair that fits a row.
    """
    made = objective_loss(s, lora, mesh)
    if made is None:
        return None
    from ..preference import (
        REFERENCE_DIR,
        keep_reference,
        packing_report,
        read_reference,
        reference_logps,
    )

    loss, beta = made
    splits, layouts = _pair_splits(data)
    _report_skips(data, layouts, s.seq_len)
    say(f"zoo: {packing_report(layouts[: len(data.train.layouts)]).sentence()}")
    if loss.reference is None:
        say(f"zoo: {beta}, no reference model")
        return loss
    if loss.reference == "adapters":
        say(f"zoo: {beta}, reference: the base model with the LoRA adapters switched off")
        return loss
    where = out / REFERENCE_DIR
    if read_reference(out, splits):
        say(f"zoo: {beta}, reference log-probabilities read from {where}")
    else:
        started = time.perf_counter()
        tables = reference_logps(
            reference_weights(s, model, lora),
            splits,
            seq_len=s.seq_len,
            batch_size=s.batch_size,
            mesh=mesh,
            rules=rules,
            compute_dtype=loss.compute_dtype,
            pad_id=data.train.pad_id,
        )
        keep_reference(out, splits, tables)
        pairs = sum(int((~(t[:, 0] != t[:, 0])).sum()) for t in tables)
        say(
            f"zoo: {beta}, reference log-probabilities of {pairs:,} pairs computed in "
            f"{time.perf_counter() - started:.1f} s with the starting weights, kept in {where}"
        )
    return loss
