"""``zoo train`` and ``zoo finetune``: settings → model, data, the loop, a summary and a sample."""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time
from typing import Any

from ._capacity import check_state_fits
from ._cli_data import check_data_paths, load_corpus, make_loaders
from ._cli_mesh import check_mesh_fits, check_positions, cli_mesh, load_hf_on_mesh
from ._export import atomic_directory, check_export_target
from ._requirements import check_requirement
from ._settings import SCHEMA, Settings
from ._usage import UsageError
from .checkpoint import run_lock
from .parallel import is_primary


def _say(message: str) -> None:
    """A line for the user, from process 0 only (tqdm.write keeps an open progress bar intact)."""
    from tqdm.auto import tqdm

    if is_primary():
        tqdm.write(message, file=sys.stderr)


def join_processes(args: Any, s: Settings) -> None:
    """Join a multi-process run (flags, the ``ZOO_*`` variables, or JAX's own detection of TPU
    pods, SLURM and Open MPI) and refuse to go on if the processes' settings differ."""
    from .parallel import ProcessConfig, StartError, agree_settings, start_processes

    try:
        config = ProcessConfig.from_sources(
            {
                "coordinator": args.coordinator,
                "num_processes": args.num_processes,
                "process_id": args.process_id,
            }
        )
        start_processes(config)
        agree_settings(
            {
                **s.values,
                **{f"model_config.{k}": v for k, v in s.model_config.items()},
                **{f"sharding.{k}": v for k, v in s.sharding.items()},
            }
        )
    except (ValueError, StartError) as e:
        raise UsageError.from_error(e) from None


def _train_config(s: Settings) -> Any:
    from ._config import OptimizerConfig, TrainConfig
    from ._optim import default_warmup
    from .parallel import MeshConfig

    warmup = s["optimizer.warmup_steps"]
    try:
        if warmup is None:
            warmup = default_warmup(s["steps"], s["optimizer.warmup_fraction"])
    except ValueError as e:
        raise UsageError(str(e)) from None
    optimizer = OptimizerConfig(
        name=s["optimizer.name"],
        lr=s["lr"],
        warmup_steps=min(warmup, s["steps"]),
        schedule=s["optimizer.schedule"],
        min_lr_ratio=s["optimizer.min_lr_ratio"],
        weight_decay=s["optimizer.weight_decay"],
        b1=s["optimizer.b1"],
        b2=s["optimizer.b2"],
        eps=s["optimizer.eps"],
        momentum=s["optimizer.momentum"],
        clip_norm=s["optimizer.clip_norm"],
    )
    return TrainConfig(
        steps=s["steps"],
        batch_size=s["batch_size"],
        grad_accum=s["grad_accum"],
        optimizer=optimizer,
        z_loss=s["z_loss"],
        compute_dtype=s["compute_dtype"],
        seed=s["seed"],
        log_every=s["log_every"],
        eval_every=s["eval_every"],
        eval_batches=s["eval_batches"],
        checkpoint_every=s["save_every"],
        keep=s["keep"],
        progress=s["progress"],
        mesh=MeshConfig.parse(s.mesh_text),
        sharding=dict(s.sharding),
        profile=_profile_window(s["profile"]),
    )


def _profile_window(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    from .profile import parse_window

    try:
        return parse_window(text)
    except ValueError as err:
        raise UsageError.from_error(err) from None


def _model_fields() -> set[str]:
    import zoo_models

    return {f.name for f in dataclasses.fields(zoo_models.ModelConfig)}


def _check_model_changes(changes: dict[str, Any]) -> None:
    unknown = sorted(set(changes) - _model_fields())
    if unknown:
        raise UsageError(
            f"Unknown setting `model_config.{unknown[0]}`; model_config takes the fields of "
            "zoo_models.ModelConfig (e.g. d_model, n_layers, n_heads, mlp_hidden)."
        )


def _check_kernel(name: str | None) -> None:
    if name is None:
        return
    import zoo_attention

    if name not in zoo_attention.kernels():
        raise UsageError(
            f"attention.implementation {name!r} is not an installed kernel; installed: "
            f"{', '.join(sorted(zoo_attention.kernels()))}."
        )


def preset_config(s: Settings, tokenizer: Any | None = None) -> Any:
    """The ``ModelConfig`` of the preset with the settings' changes and attention kernel.

    With a ``tokenizer`` (a run from scratch) the vocabulary is sized to it unless set; without
    one (``zoo compile``) the preset keeps its own.
    """
    import zoo_models

    try:
        config = zoo_models.get(s["model"])
    except ValueError as e:
        raise UsageError.from_error(e) from None
    changes = dict(s.model_config)
    _check_model_changes(changes)
    if tokenizer is not None:
        changes.setdefault("vocab_size", tokenizer.vocab_size)
        if changes["vocab_size"] < tokenizer.vocab_size:
            raise UsageError(
                f"model_config.vocab_size {changes['vocab_size']} is smaller than the tokenizer's "
                f"{tokenizer.vocab_size} ids; raise it."
            )
        if tokenizer.eos_id is not None and config.eos_token_id is None:
            changes.setdefault("eos_token_id", tokenizer.eos_id)
    changes["attention_implementation"] = s["attention.implementation"]
    try:
        config = config.replace(**changes)
    except (ValueError, TypeError) as e:
        raise UsageError(f"model_config: {e}") from None
    check_positions(config, s["seq_len"])
    return config


def _scratch_model(
    s: Settings, tokenizer: Any, mesh: Any, rules: dict[str, Any], *, resuming: bool
) -> tuple[Any, Any, dict[str, Any]]:
    """A fresh model of the preset, built directly sharded on ``mesh``; when resuming, only its
    builder (the checkpoint provides the weights). Returns ``(model or builder, config, init)``."""
    import equinox as eqx
    import jax

    import zoo_models

    from .parallel import init_sharded, tree_shardings

    config = preset_config(s, tokenizer)
    seed = s["seed"]

    def build() -> Any:
        return zoo_models.build(config, key=jax.random.key(seed))

    init = {"kind": "random", "preset": s["model"], "seed": seed}
    if resuming:
        return build, config, init
    shardings = tree_shardings(eqx.filter_eval_shape(build), mesh, rules)
    return init_sharded(build, mesh=mesh, shardings=shardings), config, init


def checkpoint_dtype_of(source: pathlib.Path) -> str:
    """The parameter dtype the Hugging Face directory ``source`` declares (float32 if none)."""
    import json

    import zoo_models

    try:
        declared = zoo_models.checkpoint_dtype(json.loads((source / "config.json").read_text()))
    except (OSError, ValueError):
        declared = None  # load_hf reports an unreadable config.json in its own words
    return declared or "float32"


def _source_model(
    s: Settings, out: pathlib.Path, mesh: Any, rules: dict[str, Any]
) -> tuple[Any, Any, dict[str, Any], dict[str, Any] | None]:
    """The model to fine-tune (placed on ``mesh``), its tokenizer, how it was obtained, and its
    checkpoint provenance."""
    from ._cli_mesh import tokenizer_source
    from ._runs import (
        TOKENIZER_DIR,
        copy_tokenizer_files,
        load_run,
        read_generation,
        write_generation,
    )
    from .peft import merge_lora

    from_hf, from_run = s["from_hf"], s["from_run"]
    if (from_hf is None) == (from_run is None):
        raise UsageError("zoo finetune needs exactly one of --from-hf DIR or --from-run DIR.")
    impl = s["attention.implementation"]
    if from_hf is not None:
        source = pathlib.Path(from_hf)
        if not (source / "config.json").is_file():
            raise UsageError(
                f"{from_hf!r} is not a Hugging Face model directory (no config.json); pass one."
            )
        changes = dict(s.model_config)
        _check_model_changes(changes)
        # Float32 master weights whatever the checkpoint's dtype (see _precision).
        changes.setdefault("param_dtype", "float32")
        model, tokenizer = load_hf_on_mesh(
            source, mesh, rules, tokenizer=s["tokenizer"], attention_implementation=impl, **changes
        )
        if is_primary():
            copy_tokenizer_files(tokenizer_source(source, s["tokenizer"]), out / TOKENIZER_DIR)
            write_generation(read_generation(source), out)
        init = {"kind": "hf", "path": str(source.resolve()), "dtype": checkpoint_dtype_of(source)}
        return model, tokenizer, init, None
    if s.model_config:
        raise UsageError("model_config cannot change a model loaded with --from-run; drop it.")
    loaded = load_run(from_run, attention_implementation=impl, mesh=mesh, rules=rules)
    model = merge_lora(loaded.model) if loaded.lora is not None else loaded.model
    src = pathlib.Path(from_run)
    if is_primary():
        copy_tokenizer_files(src / TOKENIZER_DIR, out / TOKENIZER_DIR)
        write_generation(read_generation(src), out)
    init = {"kind": "run", "path": str(src.resolve()), "step": loaded.step}
    dtype = ((loaded.meta.get("run_info") or {}).get("init") or {}).get("dtype")
    if dtype is not None:
        init["dtype"] = dtype  # still exported in the dtype of the original checkpoint
    return model, loaded.tokenizer, init, loaded.meta.get("provenance")


def _summary(out: pathlib.Path, wall: float, start_step: int, end_step: int) -> None:
    from ._loop import CHECKPOINT_DIR, METRICS_FILE, PLOT_FILE
    from ._metrics import read_metrics

    records = read_metrics(out / METRICS_FILE)
    train = [r for r in records if isinstance(r.get("loss"), int | float)]
    evals = [r for r in records if isinstance(r.get("eval_loss"), int | float)]
    rates = [r["tokens_per_s"] for r in train if isinstance(r.get("tokens_per_s"), int | float)]
    parts = [f"steps {start_step} -> {end_step} in {wall:.1f} s"]
    if rates:
        parts.append(f"{sum(rates) / len(rates):,.0f} tokens/s")
    if train:
        parts.append(f"train loss {train[0]['loss']:.3f} -> {train[-1]['loss']:.3f}")
    if evals:
        parts.append(f"eval loss {evals[-1]['eval_loss']:.3f} (ppl {evals[-1]['eval_ppl']:.2f})")
    _say("zoo: " + "; ".join(parts))
    _say(
        f"zoo: checkpoints in {out / CHECKPOINT_DIR}, metrics in {out / METRICS_FILE}, "
        f"loss curve in {out / PLOT_FILE}"
    )


def _adapter_settings(s: Settings) -> Any:
    """The LoRA settings of the PEFT adapter ``--lora-from`` continues; a different
    ``--lora-rank`` is refused."""
    from .peft import read_peft_config

    try:
        lora = read_peft_config(s["lora.from"])
    except ValueError as e:
        raise UsageError(str(e)) from None
    if s["lora.rank"] not in (0, lora.rank):
        raise UsageError(
            f"The adapter in {s['lora.from']!r} has rank {lora.rank}, not {s['lora.rank']}; "
            "drop --lora-rank (the adapter's own settings are used)."
        )
    return lora


def _check_finetune_settings(s: Settings, command: str) -> None:
    if s["lora.rank"] < 0:
        raise UsageError(
            f"--lora-rank must be positive for LoRA or 0 for full fine-tuning, got {s['lora.rank']}."
        )
    if command == "finetune" and s["model"] != SCHEMA["model"].default:
        raise finetune_model_error()


def finetune_model_error() -> UsageError:
    """A preset named for ``zoo finetune``, whose model comes from its source instead."""
    return UsageError(
        "--model names a preset for zoo train; zoo finetune takes its model from --from-hf "
        "or --from-run, so drop --model."
    )


def run_training(s: Settings, *, command: str) -> int:
    """Run ``zoo train`` (``command="train"``) or ``zoo finetune``; returns the exit code."""
    check_data_paths(s["data"])
    _check_finetune_settings(s, command)
    if s["attention.require"] is not None:
        check_requirement(s["attention.require"])
    _check_kernel(s["attention.implementation"])
    out = pathlib.Path(s["out"])
    if command == "finetune" and s["export_hf"] is not None:  # refused now, not after training
        if pathlib.Path(s["export_hf"]).resolve() == out.resolve():
            raise UsageError("--export-hf cannot be the run's own --out directory; choose another.")
        check_export_target(
            s["export_hf"], sources=(s["from_hf"], s["from_run"]), overwrite=s["overwrite"]
        )
    # One training process per output directory; the checks above write nothing.
    with run_lock(out, enabled=is_primary()):
        return _run_locked(s, command=command, out=out)


def _run_locked(s: Settings, *, command: str, out: pathlib.Path) -> int:
    mesh, rules = cli_mesh(s.mesh_text, s.sharding)

    import zoo_models

    from ._changes import provenance_changes
    from ._inference import sample_text
    from ._parameters import describe_parameters, parameter_summary
    from ._runs import model_identity, read_generation, read_metas, tokenizer_spec
    from .data import byte_tokenizer
    from .parallel import describe_mesh
    from .peft import LoRAConfig

    saved = {step: meta.get("provenance") for step, meta in read_metas(out).items()}
    source_prov = None
    if command == "finetune":
        out.mkdir(parents=True, exist_ok=True)
        model, tokenizer, init, source_prov = _source_model(s, out, mesh, rules)
        mc = model.config
    else:
        tokenizer = byte_tokenizer()
        mc = preset_config(s, tokenizer)
        try:  # before the model is built: a configuration may ask for any size
            check_state_fits(mc, s["optimizer.name"], mesh)
        except ValueError as e:
            raise UsageError(str(e)) from None
    check_mesh_fits(mesh, rules, mc, batch_size=s["batch_size"])
    check_positions(mc, s["seq_len"])
    lora = None
    if command == "finetune" and s["lora.from"] is not None:
        lora = _adapter_settings(s)
        init["adapter"] = str(pathlib.Path(s["lora.from"]).resolve())
    elif command == "finetune" and s["lora.rank"] > 0:
        try:
            targets = tuple(t for item in s["lora.targets"] for t in item.split(",") if t)
            targets = targets or zoo_models.default_lora_targets(mc)
            lora = LoRAConfig(rank=s["lora.rank"], alpha=s["lora.alpha"], targets=targets)
        except ValueError as e:
            raise UsageError(str(e)) from None

    if command == "train":
        model, mc, init = _scratch_model(s, tokenizer, mesh, rules, resuming=bool(saved))
    docs, described = load_corpus(s["data"], max_bytes=s["max_bytes"], text_field=s["text_field"])
    eval_docs = None
    if s["eval_data"]:
        check_data_paths(s["eval_data"])
        eval_docs, _ = load_corpus(
            s["eval_data"], max_bytes=s["max_bytes"], text_field=s["text_field"]
        )
        described += f", evaluated on {', '.join(s['eval_data'])}"
    train_data, val_data = make_loaders(
        docs,
        tokenizer,
        seq_len=s["seq_len"],
        seed=s["seed"],
        val_fraction=s["val_fraction"],
        eval_docs=eval_docs,
    )
    config = _train_config(s)
    run_info = {
        "model": s["model"] if command == "train" else None,
        "model_config": model_identity(mc),
        "tokenizer": tokenizer_spec(tokenizer),
        "init": init,
    }

    if not saved:
        _say(
            f"zoo: {command} {mc.family} model on {described}: {train_data.num_tokens:,} "
            f"training tokens, {config.steps} steps of {config.batch_size * config.grad_accum} "
            f"x {s['seq_len']} tokens on mesh {describe_mesh(mesh)} -> {out}"
        )
    parameters = parameter_summary(model, mc, lora, init.get("dtype"))
    _say("zoo: " + describe_parameters(parameters, s["compute_dtype"], mesh))

    def on_record(rec: dict[str, Any]) -> None:
        if rec.get("event") not in ("start", "resume"):
            return
        if rec["event"] == "resume":
            before, what = (
                saved.get(rec.get("resumed_from")),
                f"checkpoint {rec.get('resumed_from')}",
            )
        else:
            before, what = source_prov, f"the checkpoint in {s['from_run']}"
        for line in provenance_changes(before, rec.get("provenance") or {}):
            _say(f"zoo: changed since {what}: {line}")

    started = time.perf_counter()
    if command == "finetune":
        import jax

        from .peft import finetune

        result = finetune(
            model,
            train_data,
            config=config,
            out=out,
            eval_data=val_data,
            lora=lora,
            key=jax.random.key(s["seed"]),
            run_info=run_info,
            stop_at=s["stop_at"],
            on_record=on_record,
            mesh=mesh,
            start_info={"parameters": parameters},
            adapter_from=s["lora.from"],
        )
    else:
        from ._loop import train

        result = train(
            model,
            train_data,
            config=config,
            out=out,
            eval_data=val_data,
            run_info=run_info,
            stop_at=s["stop_at"],
            on_record=on_record,
            mesh=mesh,
            start_info={"parameters": parameters},
        )
    if result.resumed_from is not None and result.start_step == result.step:
        _say(f"zoo: the run in {out} was already complete at step {result.step}; nothing to train.")
    if is_primary():
        _summary(out, time.perf_counter() - started, result.start_step, result.step)
    if lora is not None:
        _say(f"zoo: LoRA adapters (only) in {out / 'adapter'}")
    # The source checkpoint's generation settings (none for `zoo train`), read by every
    # process alike: each one generates the final sample.
    source = (s["from_hf"] or s["from_run"]) if command == "finetune" else None
    generation = read_generation(source) if source is not None else {}
    if command == "finetune" and s["export_hf"] is not None:
        from ._runs import TOKENIZER_DIR, export_tokenizer
        from .peft import export_hf

        # Every process gathers, process 0 writes; in the dtype the source checkpoint came in,
        # stopping where it stopped.
        with atomic_directory(s["export_hf"], enabled=is_primary()) as target:
            path = export_hf(result.model, target, dtype=init.get("dtype"), generation=generation)
            if is_primary():
                export_tokenizer(tokenizer, out / TOKENIZER_DIR, path)
        path = pathlib.Path(s["export_hf"])
        _say(f"zoo: exported the model (adapters merged) to {path}")
    if s["sample_tokens"] > 0:
        import zoo_models

        from .parallel import mesh_context

        with mesh_context(mesh, rules):
            text = sample_text(
                result.model,
                tokenizer,
                s["prompt"],
                max_new_tokens=s["sample_tokens"],
                temperature=s["temperature"],
                seed=s["seed"],
                stop_tokens=zoo_models.stop_token_ids(generation, tokenizer),
            )
        if is_primary():  # every process generated it (a sharded model), one prints it
            print(f"--- sample ({s['sample_tokens']} tokens, temperature {s['temperature']}) ---")
            print(s["prompt"] + text)
    return 0
