"""The refusals a run can meet before anything heavy is imported or written: one sentence each."""

from __future__ import annotations

import pathlib

from .._usage import UsageError
from ..settings import OBJECTIVES, FinetuneSettings, RunSettings
from ._data import check_data_paths
from ._export_record import is_own_export


def check_run(s: RunSettings) -> None:
    """The output directory, the data paths, the trackers, the kernel's version range and
    name."""
    from .._requirements import check_requirement
    from ..tracking import tracker_names

    out = pathlib.Path(s.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {s.out!r} is a file; pass a directory for the run.")
    check_data_paths(s.data)
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


def finetune_model_error() -> UsageError:
    """A preset named for ``zoo finetune``, whose model comes from its source instead."""
    return UsageError(
        "--model names a preset for zoo train; zoo finetune takes its model from --from-hf "
        "or --from-run, so drop --model."
    )


def check_objective(s: FinetuneSettings) -> None:
    """The objective, and data of its kind: preference pairs for a preference objective, none
    for ``sft``. Each source is read up to its first record, before any model is loaded."""
    from zoo_data import holds_pairs

    if s.objective not in OBJECTIVES:
        raise UsageError(
            f"--objective must be one of {', '.join(OBJECTIVES)}; got {s.objective!r}."
        )
    if s.objective == "grpo":
        check_grpo(s)
        return
    if s.beta is not None and not s.beta > 0:
        raise UsageError(f"--beta must be positive, got {s.beta}.")
    preference = s.objective != "sft"
    if preference and not s.data:
        raise UsageError(
            f"--objective {s.objective} trains on preference pairs; pass them with --data (JSON "
            "lines with `prompt`, `chosen` and `rejected`, or a token store of them)."
        )
    for path in [*s.data, *s.eval_data]:
        try:
            pairs = holds_pairs(path)
        except ValueError as e:
            raise UsageError.from_error(e) from None
        if preference and not pairs:
            raise UsageError(
                f"--objective {s.objective} trains on preference pairs, but {path!r} holds plain "
                "text or examples; pass JSON lines with `prompt`, `chosen` and `rejected` (or a "
                "token store of them)."
            )
        if not preference and pairs:
            raise UsageError(
                f"{path!r} holds preference pairs; pass --objective dpo, ipo, simpo or orpo to "
                "tune on them."
            )


def check_grpo(s: FinetuneSettings) -> None:
    """GRPO's prompts (JSON lines files) and reward functions are named, and nothing is
    evaluated on held-out data (its loss needs rollouts)."""
    if not s.data or not all(str(p).endswith(".jsonl") and pathlib.Path(p).is_file()
                             for p in s.data):  # fmt: skip
        raise UsageError(
            "--objective grpo samples completions of prompts; pass them with --data as JSON "
            "lines files (`prompt` as text or chat messages, any other columns for the rewards)."
        )
    if s.eval_data:
        raise UsageError("--objective grpo evaluates no held-out data; drop --eval-data.")
    if s.epochs is not None:
        raise UsageError("--objective grpo counts its length in --steps; drop --epochs.")
    if not s.grpo.reward:
        raise UsageError(
            "--objective grpo needs at least one --reward (module:function, "
            "path/to/file.py:function, or answer_match, format_match, length_penalty)."
        )
    if s.grpo.reward_weights and len(s.grpo.reward_weights) != len(s.grpo.reward):
        raise UsageError(
            f"--reward-weights gives {len(s.grpo.reward_weights)} weights for "
            f"{len(s.grpo.reward)} reward functions; give one per --reward."
        )
    rows = s.batch_size * s.grad_accum
    if rows % s.grpo.num_generations:
        raise UsageError(
            f"--batch-size x --grad-accum = {rows} completions per step are not whole groups "
            f"of --num-generations {s.grpo.num_generations}; make it a multiple."
        )


def check_finetune(s: FinetuneSettings) -> None:
    """What ``zoo train`` checks, and the export target (refused now, not after training)."""
    from .._export_directory import check_export_target

    if s.model != RunSettings.model:
        raise finetune_model_error()
    check_run(s)
    check_objective(s)
    if s.export_hf is None:
        return
    if pathlib.Path(s.export_hf).resolve() == pathlib.Path(s.out).resolve():
        raise UsageError("--export-hf cannot be the run's own --out directory; choose another.")
    # The run's own earlier export is replaced without --overwrite.
    own = is_own_export(pathlib.Path(s.out), s.export_hf)
    check_export_target(s.export_hf, sources=(s.from_hf, s.from_run), overwrite=s.overwrite or own)
