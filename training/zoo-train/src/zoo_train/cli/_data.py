"""``zoo data prepare``, ``zoo data info`` and ``zoo data verify``: zoo-data's subcommands
(:mod:`zoo_data.cli`, also the ``zoo-data`` command) mounted on ``zoo``."""

from __future__ import annotations

import argparse

from zoo_data.cli import DESCRIPTION as _DESCRIPTION
from zoo_data.cli import HELP as HELP
from zoo_data.cli import add_arguments as add_data_arguments

from .._usage import UsageError

DESCRIPTION = _DESCRIPTION.replace("`zoo-data ", "`zoo data ")

__all__ = ["DESCRIPTION", "HELP", "add_data_arguments", "run_data"]


def run_data(args: argparse.Namespace) -> int:
    """Run ``zoo data ACTION``; zoo-data's input errors are usage errors (exit 2)."""
    from zoo_data.cli import run

    try:
        return run(args)
    except ValueError as err:
        raise UsageError(str(err)) from None
