"""Flags several commands share: the settings of a run, the mesh, the tokenizer."""

from __future__ import annotations

import argparse
from typing import Any

from ..settings import add_flags, defaults

MESH_HELP = (
    "device mesh: sizes of the data, fsdp, expert, context and tensor axes, -1 = every device "
    "left over (default: data=1,fsdp=-1,tensor=1, i.e. every device fully sharded; "
    "context=N splits each sequence over N devices)"
)


def add_mesh_flag(p: argparse.ArgumentParser, *, default: Any = argparse.SUPPRESS) -> None:
    """``--mesh AXIS=N,...``."""
    p.add_argument("--mesh", metavar="AXIS=N,...", default=default, help=MESH_HELP)


def add_tokenizer_flag(p: argparse.ArgumentParser) -> None:
    """``--tokenizer PATH``, replacing a model's own tokenizer."""
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        default=None,
        help="tokenizer directory or tokenizer.json (default: the model's own; required for a "
        "Hugging Face directory without one)",
    )


def add_settings_flags(p: argparse.ArgumentParser, command: str) -> None:
    """``--config``, ``--set`` and a flag per setting of ``command`` (``train``, ``finetune`` or
    ``compile``), with its defaults."""
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML, YAML or JSON file of settings: the flags' names with underscores, tables "
        "such as [optimizer] and [mesh] (README: 'Configs')",
    )
    p.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="assignments",
        help="set any setting, e.g. --set optimizer.warmup_steps=20 --set model_config.n_layers=4",
    )
    # finetune takes its model from its source: --model is still parsed there, to be refused
    # with a sentence, but not offered with a default it would never use; compile likewise
    # refuses the fine-tuning flags that say where a model goes.
    hidden = {"finetune": ("model",), "compile": ("from_run", "export_hf", "overwrite")}
    add_flags(p, defaults(command), hidden=hidden.get(command, ()))
    add_mesh_flag(p)


def load_source(
    args: argparse.Namespace, *, batch_size: int | None = None
) -> tuple[Any, dict[str, Any], Any, Any, str]:
    """``(mesh, rules, model, tokenizer, description)`` of ``args.source`` (a run or a Hugging
    Face directory) on the mesh of ``--mesh``, with ``--tokenizer`` and
    ``--attention-implementation``; the mesh checked against the model (and a batch of
    ``batch_size`` rows)."""
    # The recipes load JAX, Equinox and Orbax: not on any `--help` path.
    from .._model_sources import load_model
    from ..recipes import check_mesh_fits, mesh_and_rules

    mesh, rules = mesh_and_rules(args.mesh)
    model, tokenizer, what = load_model(
        args.source,
        attention_implementation=args.attention_implementation,
        mesh=mesh,
        rules=rules,
        tokenizer=args.tokenizer,
        step=getattr(args, "step", None),
    )
    check_mesh_fits(mesh, rules, model.config, batch_size=batch_size)
    return mesh, rules, model, tokenizer, what
