"""Command-line flags read off the settings classes: a flag per setting that declares one."""

from __future__ import annotations

import argparse
from collections.abc import Collection
from typing import Any

from ._fields import keys

_TYPES = {"int": int, "float": float, "str": str, "list": str, "floats": float, "window": str}


def add_flags(
    parser: argparse.ArgumentParser, settings: Any, *, hidden: Collection[str] = ()
) -> None:
    """Add a flag for every setting of ``settings`` that declares one, its help showing the
    default ``settings`` holds. A flag left out of the command line is absent from the parsed
    namespace (so that a config file's value is not overridden by a default); present, its
    destination is the setting's dotted key. Settings named in ``hidden`` are parsed but not
    offered in ``--help``."""
    for key in keys(settings).values():
        if key.flag is None:
            continue
        if key.switch is not None:
            parser.add_argument(
                key.flag,
                dest=key.name,
                action="store_const",
                const=key.switch,
                default=argparse.SUPPRESS,
                help=key.flag_help or key.help,
            )
            continue
        shown = key.flag_help or f"{key.help} (default: {key.default})"
        parser.add_argument(
            key.flag,
            dest=key.name,
            type=_TYPES[key.kind.rstrip("?")],
            nargs=key.nargs,
            metavar=key.metavar,
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS if key.name in hidden else shown,
        )


def given_flags(args: argparse.Namespace, settings: Any) -> dict[str, Any]:
    """The settings given as flags, by dotted key (``mesh``: the text of ``--mesh``)."""
    known = keys(settings)
    return {k: v for k, v in vars(args).items() if k in known or k == "mesh"}
