"""Opening an input file, decompressed as it is read (``.gz``, ``.zst``).

A compressed file that ends inside its data raises ``EOFError`` (``gzip`` does so itself;
``zstandard``'s readers return what they decoded and stop, so a truncated ``.zst`` lost its
tail unsaid), and damaged ``.zst`` data raises ``OSError``, as damaged ``.gz`` data does.
"""

from __future__ import annotations

import gzip
import io
import pathlib
from typing import Any, BinaryIO

# Compressed bytes decompressed at a time: bounds the text one step can produce.
_FEED = 1 << 16


class _ZstdFrames(io.RawIOBase):
    """The frames of a ``.zst`` file, one after another, decompressed."""

    def __init__(self, raw: BinaryIO) -> None:
        import zstandard

        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._error = zstandard.ZstdError
        self._frame: Any = self._decompressor.decompressobj()
        self._in_frame = False  # fed bytes of a frame that has not ended yet
        self._out = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._out:
            data = b""
            if self._frame.eof:  # the next frame starts with what the last one left over
                data = self._frame.unused_data
                self._frame = self._decompressor.decompressobj()
                self._in_frame = False
            data = data or self._raw.read(_FEED)
            if not data:
                if self._in_frame:
                    raise EOFError("the zstd file ends inside a frame (truncated)")
                return 0
            try:
                self._out = memoryview(self._frame.decompress(data))
            except self._error as e:
                raise OSError(f"not valid zstd data ({e})") from e
            self._in_frame = not self._frame.eof
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n


def open_raw(path: pathlib.Path, compression: str) -> tuple[BinaryIO, BinaryIO]:
    """``(decompressed stream, the file under it)``; the file's position is how far the
    reading has got, in bytes on disk."""
    raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
    if compression == ".gz":
        return gzip.GzipFile(fileobj=raw), raw  # type: ignore[return-value]
    if compression == ".zst":
        return io.BufferedReader(_ZstdFrames(raw), 1 << 20), raw
    return raw, raw
