"""The refusals a run can meet before anything heavy is imported or written: one sentence each."""

from __future__ import annotations

import glob
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
    adapter and reward files."""
    inputs: list[str | None] = [*_globbed([*s.data, *s.eval_data]), s.tokenizer]
    inputs.append(s.eval_harness.include_path)
    if isinstance(s, FinetuneSettings):
        inputs += [s.from_hf, s.from_run, s.lora.from_]
        inputs += [spec.rsplit(":", 1)[0] for spec in s.grpo.reward if ".py:" in spec]
    return inputs


def check_outputs(s: RunSettings) -> None:
    """``--out`` and the data cache: never the filesystem root or a system directory, never
    an input or a path inside one (checked before anything is read or written). A run only
    adds to them, so they may hold an input (a reward file kept with the run)."""
    from zoo_data import check_output_path, is_store, system_directory

    from ._stores import data_cache

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
    from .._export import check_export_target

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
    sources = (s.from_hf, s.from_run)
    check_export_target(
        s.export_hf,
        sources=sources,
        overwrite=s.overwrite or own,
        named="--export-hf",
        inputs=tuple(i for i in run_inputs(s) if i not in sources),
    )
