"""Whether a data source holds preference pairs: a token store by its manifest, raw data by its
first records (above both ``inputs`` and ``store``, which do not import each other's way)."""

from __future__ import annotations

import os

from .inputs import raw_holds_pairs
from .store import is_store, store_info


def holds_pairs(source: str | os.PathLike[str]) -> bool:
    """Whether ``source`` holds preference pairs: a store by its manifest, every file of raw
    data by its first record or its columns.

    Raises:
        ValueError: a source that does not exist.
    """
    if is_store(source):
        return bool(store_info(source)["pairs"])
    return raw_holds_pairs(source)
