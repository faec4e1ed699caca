"""tensorboardX's event writer, summaries and protocol buffers, without its package ``__init__``.

That ``__init__`` imports tensorboardX's ``SummaryWriter``, which imports torch whenever torch is
installed: about 2.4 CPU seconds at the start of every run, for a writer zoo does not use. The
pieces zoo uses (``event_file_writer``, ``summary``, ``proto``) import numpy and protobuf only.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import sys
import types
from typing import Any


@dataclasses.dataclass(frozen=True)
class TensorBoardX:
    """What the tracker and the reader use of tensorboardX."""

    EventsWriter: Any
    Event: Any
    SessionLog: Any
    Summary: Any
    hparams: Any
    text: Any


def _load() -> TensorBoardX:
    writer = importlib.import_module("tensorboardX.event_file_writer")
    event_pb2 = importlib.import_module("tensorboardX.proto.event_pb2")
    summary_pb2 = importlib.import_module("tensorboardX.proto.summary_pb2")
    summary = importlib.import_module("tensorboardX.summary")
    return TensorBoardX(
        writer.EventsWriter,
        event_pb2.Event,
        event_pb2.SessionLog,
        summary_pb2.Summary,
        summary.hparams,
        summary.text,
    )


@functools.cache
def tensorboardx() -> TensorBoardX:
    """tensorboardX's pieces, imported once; torch stays unimported unless something else
    imports it.

    Raises:
        ImportError: tensorboardX is not installed.
    """
    if "tensorboardX" in sys.modules:  # imported whole already (by the caller's own code)
        return _load()
    spec = importlib.util.find_spec("tensorboardX")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(
            "tensorboardX is not installed; zoo-train depends on it (pip install zoo-train)"
        )
    # An empty package that stands in for tensorboardX while its submodules load.
    package = types.ModuleType("tensorboardX")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    package.__file__ = spec.origin
    sys.modules["tensorboardX"] = package
    try:
        return _load()
    finally:
        # A later `import tensorboardX` runs the package's own __init__, reusing these modules.
        if sys.modules.get("tensorboardX") is package:
            del sys.modules["tensorboardX"]
