"""``zoo eval`` and ``zoo convert``: using and converting trained models."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
from typing import Any

from .._export_directory import atomic_directory, check_export_target
from .._usage import UsageError
from ..settings import SEEDS, RunSettings, bounded
from ._benchmarks import add_benchmark_arguments, check_benchmark_flags, run_benchmarks
from ._multiprocess import add_process_flags
from ._options import add_mesh_flag, add_tokenizer_flag, load_source


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    defaults = RunSettings()
    p.add_argument("source", metavar="RUN_OR_HF_DIR")
    p.add_argument(
        "--step",
        type=bounded(int, "[0, inf)"),
        default=None,
        metavar="N",
        help="a run's checkpoint of step N (default: the newest)",
    )
    p.add_argument(
        "--data",
        nargs="+",
        metavar="PATH",
        help="token stores, or text, .jsonl, Parquet or Arrow files to evaluate on (all of it)",
    )
    p.add_argument(
        "--data-cache",
        metavar="DIR",
        default=None,
        help="keep the stores raw --data is prepared into here (default: a temporary directory)",
    )
    p.add_argument(
        "--text-field",
        default=defaults.text_field,
        metavar="NAME",
        help=f"the field of each .jsonl line that holds its text (default: {defaults.text_field})",
    )
    p.add_argument(
        "--val-fraction",
        type=bounded(float, "[0, 1)"),
        default=None,
        help="evaluate only the held-out split of --data",
    )
    p.add_argument("--seq-len", type=bounded(int, "[1, inf)"), default=128, metavar="N")
    p.add_argument("--batch-size", type=bounded(int, "[1, inf)"), default=16, metavar="N")
    p.add_argument("--max-batches", type=bounded(int, "[1, inf)"), default=None, metavar="N")
    p.add_argument(
        "--max-bytes", type=bounded(int, "[1, inf)"), default=defaults.max_bytes, metavar="N"
    )
    p.add_argument(
        "--seed", type=bounded(int, SEEDS), default=0, help="seed of the train/held-out split"
    )
    p.add_argument("--attention-implementation", metavar="KERNEL", default=None)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_tokenizer_flag(p)
    add_mesh_flag(p, default=None)
    add_benchmark_arguments(p)
    add_process_flags(p)


def _check_eval_outputs(args: argparse.Namespace) -> None:
    """``--output`` and ``--data-cache``, before any work: never the model, the data or the
    tasks read, nor anything around or inside them, nor a system directory."""
    from zoo_data import check_output_path

    inputs = [args.source, args.tokenizer, *(args.data or [])]
    inputs += [getattr(args, name, None) for name in ("adapter", "include_path")]
    try:
        if args.output is not None:
            check_output_path(args.output, inputs, flag="--output", kind="file")
        if args.data_cache is not None:
            check_output_path(args.data_cache, inputs, flag="--data-cache", may_hold_inputs=True)
    except ValueError as e:
        raise UsageError.from_error(e) from None


def run_eval(args: argparse.Namespace) -> int:
    """Print the held-out loss and perplexity, or with ``--tasks`` run benchmark tasks."""
    check_benchmark_flags(args)
    _check_eval_outputs(args)
    if args.tasks is not None:
        return run_benchmarks(args)
    # The recipes load JAX, Equinox and Orbax: not on the `zoo eval --help` path.
    from .._inference import evaluate_model
    from ..recipes import check_data_paths, check_positions, eval_sources

    data = args.data or []
    check_data_paths(data)
    mesh, rules, model, tokenizer, what = load_source(args, batch_size=args.batch_size)
    check_positions(model.config, args.seq_len)
    with tempfile.TemporaryDirectory(prefix="zoo-eval-") as scratch:
        loader, described = eval_sources(
            data,
            tokenizer,
            cache=pathlib.Path(args.data_cache or scratch),
            seq_len=args.seq_len,
            text_field=args.text_field,
            max_bytes=args.max_bytes,
            seed=args.seed,
            val_fraction=args.val_fraction,
        )
        try:
            result = evaluate_model(
                model,
                loader,
                batch_size=args.batch_size,
                max_batches=args.max_batches,
                mesh=mesh,
                rules=rules,
            )
        finally:
            for part in loader.values():
                part.close()
    print(f"zoo: evaluated {what} on {described}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"loss {result['loss']:.4f}  perplexity {result['ppl']:.3f}  tokens {int(result['tokens'])}"
        )
    return 0


def add_convert_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SRC")
    p.add_argument("dest", metavar="DST")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DST if it is not empty (written beside it, then swapped in)",
    )
    add_tokenizer_flag(p)
    add_mesh_flag(p, default=None)


def run_convert(args: argparse.Namespace) -> int:
    """Hugging Face directory → zoo run directory, or zoo run → Hugging Face (adapters merged)."""
    # The recipes, runs and PEFT load JAX, Equinox and Orbax: not on the `--help` path.
    from .._run_directory import TOKENIZER_DIR, export_tokenizer, load_run, read_generation
    from ..peft import export_hf
    from ..recipes import mesh_and_rules

    src, dst = pathlib.Path(args.source), pathlib.Path(args.dest)
    check_export_target(
        dst, sources=(src,), overwrite=args.overwrite, named="DST", inputs=(args.tokenizer,)
    )
    mesh, rules = mesh_and_rules(args.mesh)
    if (src / "config.json").is_file():
        return _hf_to_zoo(src, dst, mesh, rules, args.tokenizer)

    loaded = load_run(src, mesh=mesh, rules=rules)  # a sentence for whatever src lacks
    init = (loaded.meta.get("run_info") or {}).get("init") or {}
    with atomic_directory(dst) as target:
        export_hf(loaded.model, target, dtype=init.get("dtype"), generation=read_generation(src))
        export_tokenizer(loaded.tokenizer, src / TOKENIZER_DIR, target)
    merged = " (LoRA adapters merged)" if loaded.lora is not None else ""
    print(f"zoo: wrote step {loaded.step} of {src} to {dst} in the Hugging Face format{merged}")
    return 0


def _hf_to_zoo(
    src: pathlib.Path,
    dst: pathlib.Path,
    mesh: Any,
    rules: dict[str, Any],
    tokenizer_path: str | None = None,
) -> int:
    # Loads JAX, Optax and Orbax: not on the `zoo convert --help` path.
    from .._model_sources import checkpoint_dtype_of, load_hf_on_mesh, tokenizer_source
    from .._optim import make_optimizer
    from .._provenance import provenance
    from .._run_directory import (
        TOKENIZER_DIR,
        copy_tokenizer_files,
        model_identity,
        read_generation,
        tokenizer_spec,
        write_generation,
    )
    from .._state import init_train_state, trainable_params
    from ..checkpoint import CHECKPOINT_DIR, Checkpointer
    from ..parallel import mesh_record
    from ..settings import OptimizerConfig, TrainConfig

    # Float32 master weights, as fine-tuning keeps them; exports return to the stored dtype.
    model, tokenizer = load_hf_on_mesh(
        src, mesh, rules, tokenizer=tokenizer_path, param_dtype="float32"
    )
    # Step 0 of a run with a stateless optimizer: the checkpoint holds the weights only.
    config = TrainConfig(
        steps=1,
        optimizer=OptimizerConfig(name="sgd", momentum=0.0, weight_decay=0.0, clip_norm=None),
    )
    optimizer, _ = make_optimizer(config.optimizer, config.steps, trainable_params(model, None))
    state = init_train_state(model, optimizer, seed=config.seed)
    run_info = {
        "model": None,
        "model_config": model_identity(model.config),
        "tokenizer": tokenizer_spec(tokenizer),
        "init": {"kind": "hf", "path": str(src.resolve()), "dtype": checkpoint_dtype_of(src)},
    }
    with atomic_directory(dst) as target:
        copy_tokenizer_files(tokenizer_source(src, tokenizer_path), target / TOKENIZER_DIR)
        write_generation(read_generation(src), target)
        checkpointer = Checkpointer(target / CHECKPOINT_DIR, async_save=False)
        try:
            checkpointer.save(
                0,
                state,
                {
                    "config": config.to_dict(),
                    "run_info": run_info,
                    "provenance": provenance(),
                    "mesh": mesh_record(mesh),
                    "data_state": None,
                },
            )
        finally:
            checkpointer.close()
    print(f"zoo: wrote {src} to {dst} as a zoo checkpoint (step 0)")
    return 0
