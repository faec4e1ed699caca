"""lm-eval is an optional extra: one sentence naming how to install it when it is missing."""

from __future__ import annotations

import importlib
import types

from .._usage import UsageError

INSTALL = "pip install 'zoo-train[eval]'"


def require_lm_eval() -> types.ModuleType:
    """The ``lm_eval`` module.

    Raises:
        UsageError: lm-eval is not installed (the sentence names the extra to install).
    """
    try:
        return importlib.import_module("lm_eval")
    except ImportError as e:
        raise UsageError(
            f"Benchmark tasks need lm-eval, which is not installed ({e}); run {INSTALL}."
        ) from None
