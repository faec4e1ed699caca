"""``zoo models``: the model presets that can be trained.

The table is kept in ``presets.json`` beside this module for the zoo-models version it was
computed from, so listing it loads no JAX (``zoo_models`` imports JAX, and counting a preset's
parameters traces its model); another zoo-models version computes it afresh."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import pathlib

from .._table import format_table

#: The stored table: ``{"zoo-models": VERSION, "rows": [...]}``.
PRESETS_FILE = pathlib.Path(__file__).with_name("presets.json")


def add_models_arguments(p: argparse.ArgumentParser) -> None:
    """``zoo models`` takes no arguments."""


def _human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def preset_rows() -> list[dict[str, str]]:
    """Each preset's row of the table, computed from zoo-models (loads JAX)."""
    import zoo_models

    rows = []
    for name in zoo_models.presets():
        c = zoo_models.get(name)
        rows.append(
            {
                "preset": name,
                "family": c.family,
                "layers": str(c.n_layers),
                "d_model": str(c.d_model),
                "heads q/kv": f"{c.n_heads}/{c.kv_heads}",
                "vocab": str(c.vocab_size),
                "params": _human(zoo_models.num_params(c)),
            }
        )
    return rows


def write_presets(path: pathlib.Path = PRESETS_FILE) -> None:
    """Store the table for the installed zoo-models (after a preset changes)."""
    table = {"zoo-models": importlib.metadata.version("zoo-models"), "rows": preset_rows()}
    path.write_text(json.dumps(table, indent=1) + "\n")


def stored_rows(path: pathlib.Path = PRESETS_FILE) -> list[dict[str, str]] | None:
    """The stored table when it was computed for the installed zoo-models, else ``None``."""
    try:
        table = json.loads(path.read_text())
        installed = importlib.metadata.version("zoo-models")
    except (OSError, ValueError, importlib.metadata.PackageNotFoundError):
        return None
    return table["rows"] if table.get("zoo-models") == installed else None


def run_models(args: argparse.Namespace) -> int:
    """List the model presets with their shapes and parameter counts."""
    rows = stored_rows()
    print(format_table(rows if rows is not None else preset_rows()))
    return 0


if __name__ == "__main__":  # python -m zoo_train.cli._catalog: store the table again
    write_presets()
