"""lm-eval is an optional extra: one sentence naming how to install it when it is missing."""

from __future__ import annotations

import importlib
import pathlib
import types

from .._usage import UsageError

INSTALL = "pip install 'zoo-train[eval]'"
#: The make target of a zoo checkout that adds the extra to its ``.venv`` with the constraints.
MAKE_TARGET = "make eval-deps"


def install_command() -> str:
    """How to install the extra here: ``make eval-deps`` (in the checkout's directory) when this
    zoo-train is a checkout's editable package, else :data:`INSTALL`."""
    root = pathlib.Path(__file__).resolve().parents[5]
    makefile = root / "Makefile"
    try:
        in_tree = "\neval-deps:" in makefile.read_text()
    except OSError:
        in_tree = False
    return f"`{MAKE_TARGET}` in {root}" if in_tree else INSTALL


def require_lm_eval() -> types.ModuleType:
    """The ``lm_eval`` module.

    Raises:
        UsageError: lm-eval is not installed (the sentence names the command that installs it).
    """
    try:
        return importlib.import_module("lm_eval")
    except ImportError as e:
        raise UsageError(
            f"Benchmark tasks need lm-eval, which is not installed ({e}); run {install_command()}."
        ) from None
