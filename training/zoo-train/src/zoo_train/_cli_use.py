"""``zoo generate``, ``zoo eval`` and ``zoo convert``: using and converting trained models."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

from ._cli_data import check_data_paths, load_corpus, make_loaders
from ._cli_mesh import check_mesh_fits, check_positions, cli_mesh, load_hf_on_mesh
from ._export import atomic_directory, check_export_target
from ._usage import UsageError


def load_model(
    path: str,
    *,
    attention_implementation: str | None = None,
    mesh: Any = None,
    rules: dict[str, Any] | None = None,
    tokenizer: str | None = None,
) -> tuple[Any, Any, str]:
    """A model and tokenizer from a zoo run directory or a Hugging Face directory, its
    parameters placed on ``mesh`` by the sharding ``rules`` (default: every device);
    ``tokenizer`` (a directory or ``tokenizer.json``) replaces the source's tokenizer.

    Returns:
        ``(model, tokenizer, description)``.
    """
    from .parallel import make_mesh, make_rules

    mesh = make_mesh() if mesh is None else mesh
    rules = make_rules(rules)
    p = pathlib.Path(path)
    if (p / "config.json").is_file():
        model, tok = load_hf_on_mesh(
            p, mesh, rules, tokenizer=tokenizer, attention_implementation=attention_implementation
        )
        return model, tok, f"Hugging Face model {p}"
    from ._runs import checkpoint_steps, load_run

    if checkpoint_steps(p):
        loaded = load_run(
            p, attention_implementation=attention_implementation, mesh=mesh, rules=rules
        )
        tok = loaded.tokenizer
        if tokenizer is not None:
            import zoo_models

            from ._cli_mesh import tokenizer_source

            tok = zoo_models.load_tokenizer(tokenizer_source(p, tokenizer))
        return loaded.model, tok, f"run {p} at step {loaded.step}"
    raise UsageError(
        f"{path!r} is neither a zoo run directory (with checkpoints/) nor a Hugging Face model "
        "directory (with config.json); pass one."
    )


def cmd_generate(args: argparse.Namespace) -> int:
    """Print a continuation of the prompt."""
    from ._inference import sample_text
    from .parallel import mesh_context

    mesh, rules = cli_mesh(args.mesh)
    model, tokenizer, what = load_model(
        args.source,
        attention_implementation=args.attention_implementation,
        mesh=mesh,
        rules=rules,
        tokenizer=args.tokenizer,
    )
    check_mesh_fits(mesh, rules, model.config)
    import zoo_models

    from ._runs import read_generation

    # Stop where transformers stops on the same checkpoint (its generation settings).
    stops = zoo_models.stop_token_ids(read_generation(args.source), tokenizer)
    print(f"zoo: sampling from {what}", file=sys.stderr)
    with mesh_context(mesh, rules):
        for i in range(args.num_samples):
            text = sample_text(
                model,
                tokenizer,
                args.prompt,
                max_new_tokens=args.max_new_tokens,
                temperature=args.temperature,
                top_k=args.top_k,
                top_p=args.top_p,
                greedy=args.greedy,
                seed=args.seed + i,
                stop_tokens=stops,
            )
            if args.num_samples > 1:
                print(f"--- sample {i + 1} ---")
            print(args.prompt + text)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Print the held-out loss and perplexity."""
    from ._inference import evaluate_model

    data = args.data or []
    check_data_paths(data)
    mesh, rules = cli_mesh(args.mesh)
    model, tokenizer, what = load_model(
        args.source,
        attention_implementation=args.attention_implementation,
        mesh=mesh,
        rules=rules,
        tokenizer=args.tokenizer,
    )
    check_mesh_fits(mesh, rules, model.config, batch_size=args.batch_size)
    check_positions(model.config, args.seq_len)
    docs, described = load_corpus(data, max_bytes=args.max_bytes, text_field=args.text_field)
    if data and args.val_fraction is None:
        # Given data is evaluated whole; the stdlib corpus by its held-out split (as `zoo train`).
        from .data import PackedLoader

        try:
            loader = PackedLoader.from_documents(
                docs, tokenizer, seq_len=args.seq_len, shuffle=False, eval_only=True
            )
        except ValueError as e:
            raise UsageError(str(e)) from None
    else:
        fraction = 0.05 if args.val_fraction is None else args.val_fraction
        loader = make_loaders(
            docs, tokenizer, seq_len=args.seq_len, seed=args.seed, val_fraction=fraction
        )[1]
        if loader is None:
            raise UsageError(
                "The held-out split is too small to evaluate; pass --data or raise --val-fraction."
            )
    result = evaluate_model(
        model,
        loader,
        batch_size=args.batch_size,
        max_batches=args.max_batches,
        mesh=mesh,
        rules=rules,
    )
    print(f"zoo: evaluated {what} on {described}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"loss {result['loss']:.4f}  perplexity {result['ppl']:.3f}  tokens {int(result['tokens'])}"
        )
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    """Hugging Face directory → zoo run directory, or zoo run → Hugging Face (adapters merged)."""
    src, dst = pathlib.Path(args.source), pathlib.Path(args.dest)
    check_export_target(dst, sources=(src,), overwrite=args.overwrite)
    mesh, rules = cli_mesh(args.mesh)
    if (src / "config.json").is_file():
        return _hf_to_zoo(src, dst, mesh, rules, args.tokenizer)
    from ._runs import TOKENIZER_DIR, checkpoint_steps, export_tokenizer, load_run, read_generation
    from .peft import export_hf

    if not checkpoint_steps(src):
        raise UsageError(
            f"{str(src)!r} is neither a Hugging Face model directory (config.json) nor a zoo run "
            "directory (checkpoints/); pass one."
        )
    loaded = load_run(src, mesh=mesh, rules=rules)
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
    from ._cli_mesh import tokenizer_source
    from ._cli_train import checkpoint_dtype_of
    from ._config import OptimizerConfig, TrainConfig
    from ._loop import CHECKPOINT_DIR
    from ._optim import make_optimizer
    from ._provenance import provenance
    from ._runs import (
        TOKENIZER_DIR,
        copy_tokenizer_files,
        model_identity,
        read_generation,
        tokenizer_spec,
        write_generation,
    )
    from ._state import init_train_state, trainable_params
    from .checkpoint import Checkpointer
    from .parallel import mesh_record

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
