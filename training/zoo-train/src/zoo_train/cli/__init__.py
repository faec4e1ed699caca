"""The ``zoo`` command line: the parser, a table of commands (one module per command group)
and, in one place, how a command ends (exit codes and one-sentence errors)."""

from ._main import main as main
from ._parser import build_parser as build_parser
