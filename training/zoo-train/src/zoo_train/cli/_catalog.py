"""``zoo models``: the model presets that can be trained."""

from __future__ import annotations

import argparse

from .._table import format_table


def add_models_arguments(p: argparse.ArgumentParser) -> None:
    """``zoo models`` takes no arguments."""


def _human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def run_models(args: argparse.Namespace) -> int:
    """List the model presets with their shapes and parameter counts."""
    import zoo_models  # loads JAX and Equinox: not on the `zoo models --help` path

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
    print(format_table(rows))
    return 0
