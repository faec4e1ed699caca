"""``zoo finetune --objective dpo|ipo|simpo|orpo``: preference tuning on pairs. The loss, and
where its reference comes from (the base with the LoRA adapters off, or log-probabilities
computed once before training and kept in the run); the lines saying what was skipped and what
packing saved."""

from __future__ import annotations

import pathlib
import time
from typing import Any

from .._usage import UsageError
from ..peft import LoRAConfig
from ..settings import FinetuneSettings
from . import _steps as steps


def preference(s: FinetuneSettings) -> int:
    """Tune ``s.from_hf`` or ``s.from_run`` on the preference pairs of ``s.data`` into
    ``s.out`` (resuming what is there) and export it to ``s.export_hf``; returns the exit
    code."""
    steps.check_finetune(s, _check)
    if steps.already_complete(s):  # nothing is loaded, nothing in the run is touched
        return 0
    out = pathlib.Path(s.out)
    # One training process per output directory.
    with steps.output_directory(out), steps.open_trackers(s, out) as trackers:
        mesh, rules = steps.mesh_and_rules(s.mesh_text, s.sharding)
        saved = steps.saved_provenance(out)
        model, lora = steps.finetune_source(s, out, mesh, rules, seq_len=s.seq_len)
        with steps.build_data(s, model.tokenizer) as data:
            s = steps.epochs_as_steps(s, data.train)
            loss = reference_ready(s, model, data, lora, mesh, rules)
            trainer = steps.finetune_trainer(
                s, model, lora, loss, mesh, objective=objective_info(s)
            )
            result = steps.train_and_report(
                trainer, s, "finetune", model, data, lora, saved, trackers
            )
        steps.finish_finetune(s, trainer, model, lora, result, trackers)
    return 0


def _check(s: FinetuneSettings) -> None:
    """A positive ``--beta`` and preference pairs in every source."""
    if s.beta is not None and not s.beta > 0:
        raise UsageError(f"--beta must be positive, got {s.beta}.")
    steps.check_data_kind(s, pairs=True)


def objective_info(s: FinetuneSettings) -> dict[str, Any]:
    """What the run records of its objective: a preference run resumes only with the same."""
    simpo_gamma = s.simpo_gamma if s.objective == "simpo" else None
    return {"name": s.objective, "beta": s.beta, "simpo_gamma": simpo_gamma}


def preference_loss(s: FinetuneSettings, lora: LoRAConfig | None, mesh: Any) -> tuple[Any, str]:
    """``(loss, described)`` of ``s.objective`` as ``zoo finetune`` trains it: its reference
    the base with the LoRA adapters off, the batch's ``ref_logps`` (computed before training),
    or none. ``zoo compile`` compiles this loss; :func:`reference_ready` first makes the
    reference tables it reads.

    Raises:
        UsageError: a bad ``--beta``.
    """
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


def reference_ready(
    s: FinetuneSettings,
    model: steps.Model,
    data: steps.Data,
    lora: LoRAConfig | None,
    mesh: Any,
    rules: Any,
) -> Any:
    """The loss of ``s.objective``, its reference ready: with LoRA the adapters switched off;
    else (or continuing an adapter) the tables of ``OUT/reference``, read when the run kept
    them, computed now otherwise.

    Raises:
        UsageError: a bad ``--beta``, or no pair that fits a row.
    """
    from ..preference import (
        REFERENCE_DIR,
        keep_reference,
        packing_report,
        read_reference,
        reference_logps,
    )

    loss, beta = preference_loss(s, lora, mesh)
    splits, layouts = _pair_splits(data)
    _report_skips(data, layouts, s.seq_len)
    steps.say(f"zoo: {packing_report(layouts[: len(data.train.layouts)]).sentence()}")
    if loss.reference is None:
        steps.say(f"zoo: {beta}, no reference model")
        return loss
    if loss.reference == "adapters":
        steps.say(f"zoo: {beta}, reference: the base model with the LoRA adapters switched off")
        return loss
    out = pathlib.Path(s.out)
    where = out / REFERENCE_DIR
    if read_reference(out, splits):
        steps.say(f"zoo: {beta}, reference log-probabilities read from {where}")
    else:
        started = time.perf_counter()
        tables = reference_logps(
            steps.reference_weights(s, model, lora),
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
        steps.say(
            f"zoo: {beta}, reference log-probabilities of {pairs:,} pairs computed in "
            f"{time.perf_counter() - started:.1f} s with the starting weights, kept in {where}"
        )
    return loss


def _pair_splits(data: steps.Data) -> tuple[list[Any], list[Any]]:
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


def _report_skips(data: steps.Data, layouts: list[Any], seq_len: int) -> None:
    """A line per kind of pair left out: at prepare time (no preference) and here (too long)."""
    from zoo_data import skipped_sentence

    stores = [*data.train.stores, *(part.store for part in (data.val or {}).values())]
    seen: set[str] = set()
    for store in stores:
        if store.fingerprint in seen:
            continue
        seen.add(store.fingerprint)
        for reason, (count, first) in (store.manifest["skipped"].get("pairs") or {}).items():
            steps.say(f"zoo: {skipped_sentence(reason, count, first)}.")
    long = [(lay.split, int(d)) for lay in layouts for d in lay.skipped]
    if long:
        split, doc = long[0]
        steps.say(
            f"zoo: skipped {len(long)} pair{'s' if len(long) != 1 else ''} longer than a row of "
            f"--seq-len + 1 = {seq_len + 1} tokens (first: {split.origin(doc)}); raise --seq-len "
            "to train on them."
        )
