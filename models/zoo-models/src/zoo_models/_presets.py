"""Named model configurations: published architectures and tiny ones for tests, gathered from
every registered family (:mod:`zoo_models.families`)."""

from __future__ import annotations

from ._config import ModelConfig
from .families import registered

__all__ = ["get", "presets"]


def _catalogue() -> dict[str, ModelConfig]:
    entries = [(name, c) for family in registered() for name, c in family.presets().items()]
    # Published architectures first, then the tiny ones for tests, each in family order.
    entries.sort(key=lambda entry: entry[0].endswith("-tiny"))
    return dict(entries)


def presets() -> list[str]:
    """Names of every preset, in catalogue order."""
    return list(_catalogue())


def get(name: str) -> ModelConfig:
    """The preset called ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    catalogue = _catalogue()
    try:
        return catalogue[name]
    except KeyError:
        raise ValueError(
            f"unknown model preset {name!r}; known presets: {', '.join(catalogue)}."
        ) from None
