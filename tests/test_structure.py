"""The house rules of the packages' source: short functions (a module's size follows its job:
the old cap on module lines is retired, since it split recipes into fragments)."""

from __future__ import annotations

import ast
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 100


def _modules() -> list[pathlib.Path]:
    return sorted(p for p in REPO.glob("*/*/src/**/*.py") if ".venv" not in p.parts)


def test_there_are_package_sources_to_check():
    packages = {p.relative_to(REPO).parts[:2] for p in _modules()}
    assert len(packages) >= 6, packages


def test_every_function_is_under_100_lines():
    long = {}
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - first + 1  # type: ignore[operator]
                if lines >= MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(REPO)}:{node.name}"] = lines
    assert not long, f"functions of {MAX_FUNCTION_LINES} lines or more (split them): {long}"
