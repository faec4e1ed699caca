"""The names of the registered model families: the ``family`` values ``ModelConfig`` accepts.

Kept apart from the registry (``families``, whose records name ``ModelConfig``), so that the
config checks a family without importing the families.
"""

from __future__ import annotations

_NAMES: dict[str, None] = {}  # insertion-ordered: the catalogue's order


def family_names() -> tuple[str, ...]:
    """The registered families' names, in the order they were registered."""
    return tuple(_NAMES)


def add_name(name: str) -> None:
    """Record ``name`` as registered."""
    _NAMES[name] = None


def remove_name(name: str) -> None:
    """Forget ``name``."""
    _NAMES.pop(name, None)
