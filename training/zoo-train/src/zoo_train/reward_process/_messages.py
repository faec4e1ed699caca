"""The messages between zoo and a reward process: pickled values over pipes, each preceded by
its length, so a message of any size arrives whole or not at all."""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any

_LENGTH = struct.Struct("!Q")


def send(fd: int, message: Any) -> None:
    """Write ``message`` to ``fd`` whole (blocking).

    Raises:
        pickle.PicklingError, TypeError, AttributeError: ``message`` cannot be pickled.
        BrokenPipeError: the other end has closed.
    """
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, count: int) -> bytes:
    parts: list[bytes] = []
    while count:
        part = os.read(fd, min(count, 1 << 20))
        if not part:
            raise EOFError("the other end closed")
        parts.append(part)
        count -= len(part)
    return b"".join(parts)


def receive(fd: int) -> Any:
    """The next message from ``fd`` (blocking).

    Raises:
        EOFError: the other end closed (or died) before a whole message came.
    """
    (count,) = _LENGTH.unpack(_read_exactly(fd, _LENGTH.size))
    return pickle.loads(_read_exactly(fd, count))
