"""The commands that need no model load no JAX: ``zoo --help``, a command's ``--help``,
``zoo kernels`` and ``zoo data`` run without importing jax, jaxlib, equinox, optax, orbax or
lm_eval (each of which takes seconds to import on a busy machine)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("jax", "jaxlib", "equinox", "optax", "orbax", "lm_eval")

# Runs `zoo ARGS` as the console script does, then prints the heavy packages it imported.
CHILD = f"""
import json, sys
from zoo_train.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as stop:  # --help and argument errors end through argparse
    code = stop.code
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _zoo(*args: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=300
    )
    return json.loads(proc.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("train", "--help"),
        ("finetune", "--help"),
        ("eval", "--help"),
        ("data", "--help"),
        ("kernels",),
        ("models",),
    ],
)
def test_no_jax_for_help_and_listings(args):
    assert _zoo(*args) == {"code": 0, "heavy": []}


def test_no_jax_to_prepare_and_describe_a_token_store(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("def f(x):\n    return x + 1\n" * 50)
    store = tmp_path / "store"
    assert _zoo("data", "prepare", str(corpus), "--out", str(store)) == {"code": 0, "heavy": []}
    assert _zoo("data", "info", str(store)) == {"code": 0, "heavy": []}


def test_the_check_sees_jax_when_a_command_loads_it():
    # The same child, on a command that needs JAX: the assertion above can fail.
    assert set(_zoo("kernels", "--here")["heavy"]) >= {"jax", "jaxlib"}


def test_the_table_holds_zoo_datas_help_for_zoo_data():
    # The table repeats it so that `zoo --help` need not import zoo_data.cli (and numpy).
    from zoo_data.cli import DESCRIPTION, HELP
    from zoo_train.cli._commands import COMMANDS

    (data,) = [c for c in COMMANDS if c.name == "data"]
    assert (data.help, data.description) == (
        HELP,
        DESCRIPTION.replace("`zoo-data ", "`zoo data "),
    )


def test_the_stored_presets_table_is_the_computed_one():
    # `zoo models` prints the stored table (no JAX): it must be the one zoo-models computes;
    # after a preset changes, `python -m zoo_train.cli._catalog` stores it again.
    from zoo_train.cli._catalog import preset_rows, stored_rows

    assert stored_rows() == preset_rows()
