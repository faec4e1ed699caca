"""``python -m zoo_models``: the preset catalogue with parameter counts."""

from __future__ import annotations

import argparse
import sys

from rich import box
from rich.console import Console
from rich.table import Table

from ._model import num_params
from ._presets import get, presets


def _human(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def catalogue() -> Table:
    """The presets as a rich table: name, family, shapes and parameter count."""
    # No vertical rules: the widest rows (moonlight-16b-a3b, deepseek_v3) fit 80 columns.
    table = Table(
        title="zoo model presets", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    for column in ("preset", "family", "layers", "d_model", "q/kv", "vocab", "params"):
        left = column in ("preset", "family")
        table.add_column(column, justify="left" if left else "right", no_wrap=True)
    for name in presets():
        c = get(name)
        n = num_params(c)
        table.add_row(
            name,
            c.family,
            str(c.n_layers),
            str(c.d_model),
            f"{c.n_heads}/{c.kv_heads}",
            str(c.vocab_size),
            _human(n),
        )
    return table


def main(argv: list[str] | None = None) -> int:
    """Print the preset catalogue; ``--json NAME`` prints one preset's config as JSON."""
    parser = argparse.ArgumentParser(prog="python -m zoo_models", description=main.__doc__)
    parser.add_argument("--json", metavar="NAME", help="print the config of preset NAME as JSON")
    args = parser.parse_args(argv)
    if args.json is not None:
        try:
            print(get(args.json).to_json())
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    # Wide enough for every name and count whole, on a terminal or in a pipe (80 columns).
    console = Console()
    console.width = max(console.width, 100)
    console.print(catalogue())
    return 0
